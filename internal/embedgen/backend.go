package embedgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
	"github.com/genq/genq/internal/llamacpp"
)

// Backend serves an embedding model: genq.Backend for embedding jobs.
type Backend struct {
	model *llamacpp.Model
	ectx  *llamacpp.EmbeddingContext
	batch *llamacpp.Batch
	sched *scheduler
	info  genq.BackendInfo
	// maxInput is the most tokens of one input: the model's trained
	// context, and a step's tokens.
	maxInput int
	dims     []int
	vocab    *llamacpp.Vocab

	closeOnce sync.Once
}

var _ genq.Backend = (*Backend)(nil)

// Open loads the embedding model. A file that is not one (a chat model, a
// model that pools nothing) fails here, in a sentence.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	b, err := open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	go b.sched.loop()
	return b, nil
}

// open loads the model and makes the scheduler, whose loop it leaves to
// its caller to start.
func open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	log = cmp.Or(log, slog.Default())
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	path, err := modelPath(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedding model: %w", err)
	}
	lib, err := llamacpp.LoadContext(ctx, cfg.LibDir, log)
	if err != nil {
		return nil, err
	}
	device := llamacpp.BackendDevice(nil)
	params := llamacpp.ModelParams{}
	if gpu := lib.GPU(); cfg.GPU && gpu != nil {
		// An embedding model is small: every layer fits beside a chat
		// model's, and the GPU computes a step's matrices far faster.
		params.GPULayers, params.Device = -1, gpu
		device = llamacpp.BackendDevice(gpu)
	}
	m, err := lib.OpenModel(path, params)
	if err != nil {
		return nil, fmt.Errorf("embedding model %s: %w", path, err)
	}
	b := &Backend{model: m, vocab: m.Vocab, dims: cfg.dims}
	ok := false
	defer func() {
		if !ok {
			b.free()
		}
	}()
	b.maxInput = cfg.BatchTokens
	if trained := m.TrainedContext(); trained > 0 {
		b.maxInput = min(b.maxInput, trained)
	}
	b.ectx, err = m.NewEmbeddingContext(llamacpp.EmbeddingParams{Sequences: cfg.BatchInputs, Batch: cfg.BatchTokens, Threads: cfg.Threads})
	if err != nil {
		return nil, fmt.Errorf("embedding model %s: %w", path, err)
	}
	if w := b.ectx.Width(); slices.ContainsFunc(b.dims, func(d int) bool { return d >= w }) {
		return nil, fmt.Errorf("EMBEDDING_DIMENSIONS %v: the model's vectors have %d dimensions; list only fewer", b.dims, w)
	}
	b.batch = llamacpp.NewBatch(cfg.BatchTokens)
	stepTokens := cfg.stepTokens(params.Device != nil)
	b.sched = newScheduler(engine{b.ectx, b.batch}, stepTokens, cfg.BatchInputs, log)
	b.info = genq.BackendInfo{Device: device, Model: filepath.Base(path), Slots: cfg.Slots, Gather: cfg.BatchInputs,
		Limits: genq.Limits{ContextSize: b.maxInput, VocabSize: m.Vocab.Size()}}
	ok = true
	log.Info("embedding model ready", "model", path, "architecture", m.Architecture(), "engine", "llama.cpp "+lib.Version,
		"device", device.Kind, "device_name", device.Name, "threads", cfg.Threads,
		"dimensions", b.ectx.Width(), "pooling", b.ectx.Pooling(), "max_input_tokens", b.maxInput,
		"batch_tokens", cfg.BatchTokens, "step_tokens", stepTokens, "batch_inputs", cfg.BatchInputs, "slots", cfg.Slots, "took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// modelPath finds the .gguf to load, ModelFile or the one in ModelDir, and
// checks it is GGUF, so that a wrong file fails in genq's words rather
// than llama.cpp's.
func modelPath(cfg Config) (string, error) {
	path, err := gguf.Find(cfg.ModelDir, cfg.ModelFile, "EMBEDDING_MODEL_FILE")
	if errors.Is(err, gguf.ErrNoFile) {
		return "", fmt.Errorf("%w (genqctl models tiny --family bert writes a tiny one)", err)
	}
	return path, err
}

// Info is the model's device, name, slots and limits.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// Width is the length of the model's own vectors.
func (b *Backend) Width() int { return b.ectx.Width() }

// Stats count the engine steps so far and the inputs they held.
func (b *Backend) Stats() Stats { return b.sched.stats() }

// Generate embeds a job's inputs, which share engine steps with those of
// the other jobs the backend holds.
func (b *Backend) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	vecs, tokens, err := b.Embed(ctx, job.EmbeddingRequest)
	if err != nil {
		return genq.Result{}, err
	}
	total := 0
	for _, n := range tokens {
		total += n
	}
	return genq.EmbeddingResult{Model: b.info.Model, Embeddings: vecs, Tokens: tokens,
		Usage: genq.Usage{PromptTokens: total}}.Result(), nil
}

// Embed returns a request's unit vectors and each input's token count.
func (b *Backend) Embed(ctx context.Context, req genq.EmbeddingRequest) ([][]float32, []int, error) {
	if len(req.Inputs) == 0 {
		return nil, nil, &genq.Error{Code: genq.Invalid, Field: "input", Message: "this worker serves an embedding model: its jobs carry inputs to embed"}
	}
	if err := req.Validate(); err != nil {
		return nil, nil, err
	}
	width, err := b.width(req.Dimensions)
	if err != nil {
		return nil, nil, err
	}
	inputs, err := b.tokenize(req)
	if err != nil {
		return nil, nil, err
	}
	vecs, err := b.sched.submit(ctx, inputs)
	if err != nil {
		return nil, nil, err
	}
	tokens := make([]int, len(inputs))
	for i, v := range vecs {
		if width < len(v) {
			v = v[:width]
		}
		genq.Normalize(v)
		vecs[i], tokens[i] = v, len(inputs[i])
	}
	return vecs, tokens, nil
}

// width is the vectors' length a request's dimensions asks for: the
// model's own, or one EMBEDDING_DIMENSIONS allows.
func (b *Backend) width(asked int) (int, error) {
	w := b.ectx.Width()
	if asked == 0 || asked == w || slices.Contains(b.dims, asked) {
		return cmp.Or(asked, w), nil
	}
	allowed := "no other"
	if len(b.dims) > 0 {
		allowed = fmt.Sprint(append(slices.Clone(b.dims), w))
	}
	return 0, &genq.Error{Code: genq.Invalid, Field: "dimensions", Message: fmt.Sprintf(
		"dimensions %d: this model's vectors have %d dimensions, and it allows %s (EMBEDDING_DIMENSIONS)", asked, w, allowed)}
}

// tokenize turns each input into the tokens the engine reads: a text with
// the model's special tokens around it, token ids as they are. An input
// longer than the model's context is refused, or cut when the request
// asks, keeping its closing special token.
func (b *Backend) tokenize(req genq.EmbeddingRequest) ([][]int32, error) {
	out := make([][]int32, len(req.Inputs))
	total := 0
	for i, in := range req.Inputs {
		toks := in.TokenIDs
		if in.Text != "" {
			toks = b.vocab.TokenizeInput(in.Text)
		}
		for _, id := range toks {
			if int(id) >= b.vocab.Size() {
				return nil, &genq.Error{Code: genq.Invalid, Field: "input", Message: fmt.Sprintf(
					"input[%d] holds the token id %d; this model's vocabulary has tokens 0 to %d", i, id, b.vocab.Size()-1)}
			}
		}
		if len(toks) > b.maxInput {
			if !req.Truncate {
				return nil, &genq.Error{Code: genq.Invalid, Field: "input", Message: fmt.Sprintf(
					"input[%d] is %d tokens; this model embeds at most %d: shorten it, or split it", i, len(toks), b.maxInput)}
			}
			toks = b.cut(toks, in.Text != "")
		}
		if len(toks) == 0 {
			return nil, &genq.Error{Code: genq.Invalid, Field: "input", Message: fmt.Sprintf("input[%d] has no tokens", i)}
		}
		total += len(toks)
		out[i] = toks
	}
	if total > genq.MaxEmbeddingTokens {
		return nil, &genq.Error{Code: genq.Invalid, Field: "input", Message: fmt.Sprintf(
			"input is %d tokens in all; the limit is %d per request", total, genq.MaxEmbeddingTokens)}
	}
	return out, nil
}

// cut shortens toks to the model's context, keeping a text's closing
// special token ([SEP]), which the model was trained to end an input with.
func (b *Backend) cut(toks []int32, text bool) []int32 {
	last := toks[len(toks)-1]
	toks = slices.Clone(toks[:b.maxInput])
	if text && b.vocab.IsControl(last) {
		toks[len(toks)-1] = last
	}
	return toks
}

// Close stops the steps and frees the model.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		if b.sched != nil {
			b.sched.stop()
		}
		b.free()
	})
	return nil
}

func (b *Backend) free() {
	if b.batch != nil {
		b.batch.Free()
	}
	if b.ectx != nil {
		b.ectx.Close()
	}
	if b.model != nil {
		b.model.Close()
	}
}

// engine is the encoder on llama.cpp: every input a sequence of one batch.
type engine struct {
	ctx   *llamacpp.EmbeddingContext
	batch *llamacpp.Batch
}

func (e engine) encode(inputs [][]int32) ([][]float32, error) {
	e.batch.Clear()
	for seq, toks := range inputs {
		for pos, id := range toks {
			if _, err := e.batch.Add(id, pos, seq, true); err != nil {
				return nil, err
			}
		}
	}
	if err := e.ctx.Encode(e.batch); err != nil {
		return nil, err
	}
	out := make([][]float32, len(inputs))
	for seq := range inputs {
		v, err := e.ctx.Pooled(nil, seq)
		if err != nil {
			return nil, fmt.Errorf("embedding step: %w", err)
		}
		out[seq] = v
	}
	return out, nil
}
