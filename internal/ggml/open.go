package ggml

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	_ "github.com/ollama/ollama/ml/backend" // registers the ggml backend
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	_ "github.com/ollama/ollama/model/models" // registers the architectures
	"github.com/ollama/ollama/tokenizer"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggml/sample"
	"github.com/genq/genq/internal/ggml/utf8stream"
	"github.com/genq/genq/internal/procfs"
)

// Backend serves one GGUF chat model. It implements genq.Backend: it turns
// jobs into requests for its scheduler, which runs them on the engine.
type Backend struct {
	*engine
	cfg   Config
	tmpl  *chatTemplate
	info  genq.BackendInfo
	sched *scheduler
}

var _ genq.Backend = (*Backend)(nil)

// Open loads the model at start-up. Everything that can make a model
// unservable (not GGUF, an architecture the engine lacks, a chat template it
// cannot render) fails here, never on the first request.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()

	path, err := modelPath(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := readMetadata(path)
	if err != nil {
		return nil, err
	}
	arch := meta.KV().Architecture()
	tmpl, err := newChatTemplate(meta.KV().ChatTemplate())
	if err != nil {
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}

	// Check the architecture before the backend sees the file: ggml panics
	// on metadata it does not expect, where this names the problem.
	if _, err := model.NewTextProcessor(path); err != nil {
		switch {
		case errors.Is(err, model.ErrUnsupportedModel):
			return nil, fmt.Errorf("text model %s: architecture %q is not supported by the engine: %w", path, arch, err)
		case errors.Is(err, model.ErrUnsupportedTokenizer):
			return nil, fmt.Errorf("text model %s: its tokenizer is not supported: %w", path, err)
		}
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}

	threads := cfg.Threads
	if threads <= 0 {
		threads = defaultThreads(meta)
	}
	params := ml.BackendParams{AllocMemory: true, NumThreads: threads}
	if cfg.flashAttention || cfg.Graph != "engine" && arch == "llama" && modelParams(meta) >= smallModelParams {
		// On the CPU, with attention per sequence (streamGraph), ggml's
		// flash kernel beats the plain one on real models: mid-B at 8
		// sequences 316 against 255 tok/s, at 1 113 against 93. On tiny
		// ones its fixed cost per op loses (c1 8,600 against 13,600); they
		// keep the plain kernel, whose queries streamGraph folds.
		params.FlashAttention = ml.FlashAttentionEnabled
	}
	device := genq.Device{Kind: "cpu", Name: procfs.CPUName()}
	var plan *memoryPlan
	if cfg.GPU {
		gpu, layers, err := findGPU(path, threads, int(meta.KV().BlockCount()))
		if err != nil {
			return nil, err
		}
		if gpu != nil {
			params.GPULayers = layers
			params.FlashAttention = ml.FlashAttentionEnabled
			device = genq.Device{Kind: "cuda", Name: cmp.Or(gpu.Description, gpu.Name)}
			p := newMemoryPlan(meta, *gpu, cfg.ContextSize, max(cfg.BatchSize, cfg.Slots))
			plan = &p
		}
	}
	switch {
	case plan != nil && cfg.Slots == 0:
		n := plan.slotsThatFit(cfg.GPUMemoryUtilization)
		if n == 0 {
			return nil, fmt.Errorf("text model %s: %w", path, plan.doesNotFit(1, cfg.GPUMemoryUtilization))
		}
		cfg = cfg.withSlots(n)
		log.Info("text slots sized from free GPU memory", "slots", n, "free", gib(plan.free),
			"utilization", cfg.GPUMemoryUtilization, "weights", gib(plan.weights), "kv_per_slot", gib(plan.kvPerSlot))
	case plan != nil && plan.weights+uint64(cfg.Slots+1)*plan.kvPerSlot > plan.free:
		// Weights and cache alone overflow the card: fail now, in a
		// sentence, rather than after loading for seconds.
		return nil, fmt.Errorf("text model %s: %w", path, plan.doesNotFit(cfg.Slots, cfg.GPUMemoryUtilization))
	case cfg.Slots == 0:
		cfg = cfg.withSlots(cmp.Or(cfg.DefaultSlots, defaultCPUSlots))
	}

	m, err := newModel(path, params)
	if err != nil {
		err = noMemory(err, cfg.Slots, cfg.ContextSize, plan, cfg.GPUMemoryUtilization)
		if errors.Is(err, model.ErrUnsupportedModel) {
			return nil, fmt.Errorf("text model %s: architecture %q is not supported by the engine: %w", path, arch, err)
		}
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	cfg.Threads = threads
	cfg.pipeline = cfg.Pipeline == "on" || cfg.Pipeline == "auto" && device.IsCUDA()
	e := &engine{model: m, log: log, slots: cfg.Slots, batchSize: cfg.BatchSize,
		maxNewTokens: cfg.MaxNewTokens, ignoreEOS: cfg.IgnoreEOS, pipeline: cfg.pipeline}
	b := &Backend{engine: e, cfg: cfg, tmpl: tmpl}
	switch {
	case cfg.Narrow == "device":
		b.narrowK, b.narrowMinRows = cfg.narrowCandidates(), 1
	case cfg.Narrow == "auto" && device.IsCUDA():
		// Measured on an H100 with the 8B model: one row is 4% faster copied
		// whole to the host (138 against 132 tok/s), four rows 13% faster
		// narrowed on the device (402 against 355).
		b.narrowK, b.narrowMinRows = cfg.narrowCandidates(), 2
	}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()

	tok, isTok := m.(tokenizer.Tokenizer)
	if !isTok {
		return nil, fmt.Errorf("text model %s: architecture %q has no tokenizer", path, arch)
	}
	b.tok = tok
	b.vocab = newVocabInfo(tok.Vocabulary())
	if b.narrowK > 0 {
		// Greedy needs one candidate; a few more let ties go to the lower
		// id, as on the host.
		b.narrowK = min(max(b.narrowK, 4), len(tok.Vocabulary().Values))
	}
	if len(b.vocab.stop) == 0 {
		return nil, fmt.Errorf("text model %s: no end-of-turn token in its vocabulary", path)
	}
	if trained := meta.KV().ContextLength(); trained > 0 && uint64(cfg.ContextSize) > trained {
		log.Warn("text context is longer than the model was trained for",
			"context", cfg.ContextSize, "trained", trained)
	}
	if b.graph, err = newGraph(m, cfg, device); err != nil {
		err = noMemory(err, cfg.Slots, cfg.ContextSize, plan, cfg.GPUMemoryUtilization)
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	if err := b.reserveGraphs(); err != nil {
		err = noMemory(err, cfg.Slots, cfg.ContextSize, plan, cfg.GPUMemoryUtilization)
		return nil, fmt.Errorf("text model %s: reserve compute memory: %w", path, err)
	}
	if err := m.Backend().Load(ctx, func(float32) {}); err != nil {
		err = noMemory(err, cfg.Slots, cfg.ContextSize, plan, cfg.GPUMemoryUtilization)
		return nil, fmt.Errorf("text model %s: load weights: %w", path, err)
	}

	if !cfg.noSharedPrefix {
		b.prefix, err = b.sharedPrefix()
		if err != nil {
			return nil, fmt.Errorf("text model %s: %w", path, err)
		}
	}
	if err := b.prefillPrefix(); err != nil {
		return nil, fmt.Errorf("text model %s: compute the shared prompt prefix: %w", path, err)
	}

	b.info = genq.BackendInfo{Device: device, Model: filepath.Base(path), Slots: cfg.Slots}
	b.sched = newScheduler(e)
	go b.sched.loop()
	ok = true

	log.Info("text model ready",
		"model", path, "architecture", arch, "template", tmpl.name,
		"device", device.Kind, "device_name", device.Name, "threads", threads, "pipeline", cfg.pipeline,
		"narrow_top_k", b.narrowK,
		"slots", cfg.Slots, "context", cfg.ContextSize, "batch", cfg.BatchSize,
		"shared_prefix_tokens", len(b.prefix), "took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// Info says which device and model the backend runs.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// DecodeStepTimes are the mean times of the decode-only steps so far (one
// token per sequence, no prompt), the steady state benchmarks compare.
func (b *Backend) DecodeStepTimes() StepTimes { return b.sched.stats.decode.means() }

// Generate answers one job. It blocks until the answer is complete or ctx
// ends; in the latter case the sequence leaves the batch at once.
func (b *Backend) Generate(ctx context.Context, job genq.Job, progress func()) (genq.Result, error) {
	return b.GenerateStream(ctx, job, progress, nil)
}

// GenerateStream is Generate, handing each new piece of the answer to emit
// (when not nil) as it is sampled: genq.TextStreamer.
func (b *Backend) GenerateStream(ctx context.Context, job genq.Job, progress func(), emit func(genq.TextPiece)) (genq.Result, error) {
	// A batch producer can publish anything: check again what the api checked.
	if err := job.ValidateInput(); err != nil {
		return genq.Result{}, err
	}
	out, err := b.generateJobStream(ctx, job, emit)
	if err != nil {
		return genq.Result{}, err
	}
	if job.Detailed() {
		res := genq.TextResult{GeneratedText: out.Text, FinishReason: out.FinishReason,
			Usage:    &genq.Usage{PromptTokens: out.PromptTokens, CompletionTokens: out.Tokens},
			Logprobs: out.Logprobs, PromptText: out.PromptText, PromptLogprobs: out.PromptLogprobs}
		return res.Result(), nil
	}
	return genq.NewTextResult(out.Text), nil
}

// seqResult is one sequence's answer and how it was produced: GenerateStream
// makes a genq.Result of it; tests and benchmarks read the rest.
type seqResult struct {
	Text         string
	FinishReason string // genq.FinishStop or genq.FinishLength
	PromptTokens int
	Tokens       int           // tokens generated, the stop token included
	FirstToken   time.Duration // from submission to the first sampled token
	Logprobs     []genq.TokenLogprob
	// PromptText and PromptLogprobs give the prompt back when the job
	// echoes it (echoPrompt).
	PromptText     string
	PromptLogprobs []genq.TokenLogprob
}

func (b *Backend) generateJobStream(ctx context.Context, job genq.Job, emit func(genq.TextPiece)) (seqResult, error) {
	req, err := b.newJobRequest(job)
	if err != nil {
		return seqResult{}, err
	}
	req.emit = emit
	return b.sched.run(ctx, req)
}

// newJobRequest tokenizes the job's prompt, checks that it leaves room for
// the answer, and seeds a sampler with the job's settings over the
// worker's.
func (b *Backend) newJobRequest(job genq.Job) (*request, error) {
	maxNew := b.cfg.MaxNewTokens
	if n := job.MaxNewTokens(); n > 0 {
		if n > maxNew {
			return nil, genq.Errorf(genq.Invalid,
				"max_tokens is %d; this server answers with at most %d tokens (TEXT_MAX_NEW_TOKENS)", n, maxNew)
		}
		maxNew = n
	}
	prompt, err := b.jobPrompt(job)
	if err != nil {
		return nil, err
	}
	if room := b.cfg.ContextSize - maxNew; len(prompt) > room {
		return nil, genq.Errorf(genq.Invalid,
			"prompt is too long: %d tokens, and this model's context of %d tokens holds at most %d prompt tokens besides the %d of the answer",
			len(prompt), b.cfg.ContextSize, room, maxNew)
	}
	params := b.cfg.samplerParams()
	if job.Temperature != nil {
		params.Temperature = *job.Temperature
	}
	if job.TopP != nil {
		params.TopP = *job.TopP
	}
	if job.TopK != nil {
		params.TopK = max(*job.TopK, 0) // vLLM's -1, like 0, keeps every token
	}
	if job.MinP != nil {
		params.MinP = *job.MinP
	}
	if job.RepetitionPenalty != nil {
		params.RepetitionPenalty = *job.RepetitionPenalty
	}
	if job.FrequencyPenalty != nil {
		params.FrequencyPenalty = *job.FrequencyPenalty
	}
	if job.PresencePenalty != nil {
		params.PresencePenalty = *job.PresencePenalty
	}
	if len(job.LogitBias) > 0 {
		params.LogitBias = make(map[int32]float32, len(job.LogitBias))
		for id, bias := range job.LogitBias {
			if vocab := len(b.vocab.control); int(id) >= vocab {
				return nil, genq.Errorf(genq.Invalid, "logit_bias names token %d; this model's vocabulary has tokens 0 to %d", id, vocab-1)
			}
			params.LogitBias[id] = float32(bias)
		}
	}
	if err := params.Validate(); err != nil {
		return nil, genq.WrapError(genq.Invalid, err, err.Error())
	}
	seed := uint64(b.cfg.Seed)
	switch {
	case job.Seed != nil:
		seed = uint64(*job.Seed)
	case b.cfg.Seed == 0:
		seed = rand.Uint64()
	}
	sampler := sample.New(params, seed)
	sampler.RememberPrompt(prompt)
	req := newRequest(prompt, sampler)
	req.maxTokens, req.stop, req.narrowK = maxNew, job.Stop, params.Narrowed()
	req.ignoreEOS = job.IgnoreEOS
	if job.Logprobs {
		// The log-sum-exp needs every logit: whole rows.
		req.logprobs, req.topLogprobs, req.narrowK = true, job.TopLogprobs, 0
	}
	req.echo = job.Echo
	return req, nil
}

// jobPrompt is the job's prompt in tokens, BOS first: a chat rendered with
// the model's template, or raw text as it is; token ids are taken as they
// come.
func (b *Backend) jobPrompt(job genq.Job) ([]int32, error) {
	switch {
	case len(job.Messages) > 0:
		text, err := b.tmpl.RenderMessages(b.cfg.SystemPrompt, job.Messages)
		if err != nil {
			return nil, err
		}
		return b.encode(text)
	case job.Prompt != "":
		return b.encode(job.Prompt)
	case len(job.PromptTokenIDs) > 0:
		for _, id := range job.PromptTokenIDs {
			if vocab := len(b.vocab.control); int(id) >= vocab {
				return nil, genq.Errorf(genq.Invalid, "prompt holds the token id %d; this model's vocabulary has tokens 0 to %d", id, vocab-1)
			}
		}
		return job.PromptTokenIDs, nil
	}
	return b.promptTokens(job.Text)
}

func (b *Backend) encode(text string) ([]int32, error) {
	ids, err := b.tok.Encode(text, true)
	if err != nil {
		return nil, fmt.Errorf("tokenize prompt: %w", err)
	}
	return ids, nil
}

// promptTokens renders the conversation and tokenizes it, BOS first.
func (b *Backend) promptTokens(user string) ([]int32, error) {
	text, err := b.tmpl.Render(b.cfg.SystemPrompt, user)
	if err != nil {
		return nil, err
	}
	return b.encode(text)
}

// sharedPrefix finds the tokens every prompt begins with: the common start
// of two prompts whose user texts differ from their first character. The
// last common token is left out, because the tokenizer could merge it with
// some user text.
func (b *Backend) sharedPrefix() ([]int32, error) {
	a, err := b.promptTokens("a")
	if err != nil {
		return nil, err
	}
	z, err := b.promptTokens("Z?")
	if err != nil {
		return nil, err
	}
	n := 0
	for n < len(a) && n < len(z) && a[n] == z[n] {
		n++
	}
	return a[:max(0, n-1)], nil
}

// Close stops the scheduler and frees the model. Jobs still running fail.
func (b *Backend) Close() error {
	if b.sched != nil {
		b.sched.stop()
	}
	b.engine.close()
	return nil
}

// modelPath picks the .gguf to load: the configured file, or the one .gguf
// in the model directory.
func modelPath(cfg Config) (string, error) {
	if cfg.ModelFile != "" {
		p := cfg.ModelFile
		if !filepath.IsAbs(p) && cfg.ModelDir != "" {
			p = filepath.Join(cfg.ModelDir, p)
		}
		return p, nil
	}
	if cfg.ModelDir == "" {
		return "", errors.New("text model: neither a model directory nor a model file is set")
	}
	matches, err := filepath.Glob(filepath.Join(cfg.ModelDir, "*.gguf"))
	if err != nil {
		return "", fmt.Errorf("text model: %w", err)
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("text model: no .gguf file in %s", cfg.ModelDir)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("text model: %d .gguf files in %s (%s): name one with TEXT_MODEL_FILE",
		len(matches), cfg.ModelDir, strings.Join(matches, ", "))
}

// readMetadata checks that path is a GGUF file and reads its metadata,
// without the large arrays (the vocabulary).
func readMetadata(path string) (*fsggml.GGML, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte("GGUF")) {
		return nil, fmt.Errorf("text model %s: not a GGUF file (it does not start with the GGUF magic)", path)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	meta, err := fsggml.Decode(f, 0)
	if err != nil {
		return nil, fmt.Errorf("text model %s: read GGUF metadata: %w", path, err)
	}
	return meta, nil
}

// findGPU asks ggml for CUDA devices without loading any weights, and
// returns the first one with every layer (and the output layer) on it.
// ggml finds CUDA only when its CUDA backend library is on the library path
// (docs/text.md); otherwise there are no GPUs and the model runs on the CPU.
func findGPU(path string, threads, blocks int) (*ml.DeviceInfo, ml.GPULayersList, error) {
	probe, err := newModel(path, ml.BackendParams{NumThreads: threads, GPULayers: ml.GPULayersList{{}}})
	if err != nil {
		if errors.Is(err, model.ErrUnsupportedModel) {
			return nil, nil, fmt.Errorf("text model %s: architecture not supported by the engine: %w", path, err)
		}
		return nil, nil, fmt.Errorf("text model %s: %w", path, err)
	}
	defer probe.Backend().Close()
	for _, d := range probe.Backend().BackendDevices() {
		if !strings.EqualFold(d.Library, "CUDA") {
			continue
		}
		layers := make([]int, blocks+1) // the extra one is the output layer
		for i := range layers {
			layers[i] = i
		}
		return &d, ml.GPULayersList{{DeviceID: d.DeviceID, Layers: layers}}, nil
	}
	return nil, nil, nil
}

// smallModelParams is the size below which one compute thread beats
// several: each op of a model this small takes about as long as ggml's
// threads take to meet at the barrier after it. Measured on the tiny model
// (0.3M parameters): 8,400 tok/s on one thread, 3,400 on two; on the mid one
// (100M) two threads win (docs/benchmarks.md).
const smallModelParams = 20_000_000

func defaultThreads(meta *fsggml.GGML) int {
	if modelParams(meta) < smallModelParams {
		return 1
	}
	return runtime.NumCPU()
}

func modelParams(meta *fsggml.GGML) uint64 {
	var params uint64
	for _, t := range meta.Tensors().Items() {
		params += t.Elements()
	}
	return params
}

// setCacheConfig overrides the cache's layout unless the model has already
// chosen one (the cache panics then, and the model's choice stands).
func setCacheConfig(c kvcache.Cache, cc ml.CacheConfig) {
	var ignored error
	defer recoverError(&ignored)
	c.SetConfig(cc)
}

// recoverError turns a panic into *err. ggml reports a malformed file, a
// lack of memory or a failed compute by panicking, and none of these may
// kill the worker; call it deferred, directly.
func recoverError(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(error); ok {
		*err = e
		return
	}
	*err = fmt.Errorf("%v", r)
}

// newModel is model.New with its panics (ggml's way to report a malformed
// file or no memory) turned into errors.
func newModel(path string, params ml.BackendParams) (m model.Model, err error) {
	var panicked error
	defer func() {
		if panicked != nil {
			m, err = nil, fmt.Errorf("load model: %w", panicked)
		}
	}()
	defer recoverError(&panicked)
	return model.New(path, params)
}

var errClosed = errors.New("text backend closed")

// run submits req and waits for its answer or for ctx to end.
func (s *scheduler) run(ctx context.Context, req *request) (seqResult, error) {
	closed := genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down")
	select {
	case <-s.quit:
		return seqResult{}, closed
	default:
	}
	req.submitted = time.Now()
	select {
	case s.submit <- req:
	case <-ctx.Done():
		return seqResult{}, fmt.Errorf("text generation: %w", ctx.Err())
	case <-s.quit:
		return seqResult{}, closed
	}
	select {
	case <-req.done:
		return req.res, req.err
	case <-s.stopped:
		// The loop ended; it may have stopped before it saw req.
		select {
		case <-req.done:
			return req.res, req.err
		default:
			return seqResult{}, closed
		}
	case <-ctx.Done():
		// The scheduler sees the flag before its next step and frees the
		// slot; the caller does not wait for that.
		req.cancelled.Store(true)
		return seqResult{}, fmt.Errorf("text generation: %w", ctx.Err())
	}
}

// accept adds a sampled token to seq's answer and reports whether the
// answer is complete: an end-of-turn token, a stop string, or the token
// limit.
func (seq *sequence) accept(e *engine, tok int32, logprob *rowLogprob) (done bool, err error) {
	seq.generated++
	if e.vocab.isStop(tok) && !e.ignoreEOS && (seq.req == nil || !seq.req.ignoreEOS) {
		seq.finishAs(genq.FinishStop)
		return true, nil
	}
	// Special tokens (headers, reserved ones) never belong in the text.
	if !e.vocab.isControl(tok) {
		piece, err := e.tok.Decode([]int32{tok})
		if err != nil {
			return true, fmt.Errorf("decode token %d: %w", tok, err)
		}
		before := seq.text.Len()
		text, start := seq.utf8.WriteAt(piece)
		if logprob != nil {
			seq.logprobs = append(seq.logprobs, e.tokenLogprob(piece, before+start, logprob))
		}
		seq.text.WriteString(text)
		if seq.req != nil && seq.cutAtStop(before) {
			seq.finishAs(genq.FinishStop)
			return true, nil
		}
		seq.emitSafe()
	}
	if seq.generated >= seq.maxTokens(e.maxNewTokens) {
		seq.finishAs(genq.FinishLength)
		return true, nil
	}
	return false, nil
}

// maxTokens is seq's answer limit: its request's, or the worker's.
func (seq *sequence) maxTokens(worker int) int {
	if seq.req != nil && seq.req.maxTokens > 0 {
		return seq.req.maxTokens
	}
	return worker
}

func (seq *sequence) finishAs(reason string) {
	if seq.req != nil {
		seq.req.res.FinishReason = reason
	}
}

// cutAtStop ends seq's text before the first of its request's stop strings,
// when the text written since before completes one, and reports whether it
// did. Only the tail a new piece can complete is searched, so the cost per
// token does not grow with the answer.
func (seq *sequence) cutAtStop(before int) bool {
	text := seq.text.String()
	cut := -1
	for _, stop := range seq.req.stop {
		from := max(0, before-len(stop)+1)
		if i := strings.Index(text[from:], stop); i >= 0 && (cut < 0 || from+i < cut) {
			cut = from + i
		}
	}
	if cut < 0 {
		return false
	}
	seq.text.Reset()
	seq.text.WriteString(text[:cut])
	seq.utf8 = utf8stream.Stream{} // bytes held back come after the stop
	// Tokens that start at the stop string or after it are not the answer's.
	if i := slices.IndexFunc(seq.logprobs, func(l genq.TokenLogprob) bool { return l.Offset >= cut }); i >= 0 {
		seq.logprobs = seq.logprobs[:i]
	}
	return true
}

// reserveGraphs allocates compute memory for the largest steps up front, the
// way ollama's runner does, so a step never fails for want of memory.
func (e *engine) reserveGraphs() error {
	// The shapes a step takes: a whole batch of one prompt, one token for
	// every slot, and the mix (every other slot decoding beside a chunk).
	// The stream graph's groups differ between them.
	slots, batch := e.slots, e.batchSize
	var seqs []int
	var positions []int32
	prompt := func(slot, n int) {
		for i := range n {
			seqs, positions = append(seqs, slot), append(positions, int32(i))
		}
	}
	decoding := func(first, n int) {
		for i := range n {
			seqs, positions = append(seqs, first+i), append(positions, 0)
		}
	}
	reserve := func() error {
		err := e.reserveGraph(seqs, positions)
		seqs, positions = nil, nil
		return err
	}
	prompt(0, batch)
	if err := reserve(); err != nil {
		return err
	}
	decoding(0, slots)
	if err := reserve(); err != nil {
		return err
	}
	if chunk := batch - (slots - 1); slots > 1 && chunk >= 2 {
		decoding(1, slots-1)
		prompt(0, chunk)
		return reserve()
	}
	return nil
}

func (e *engine) reserveGraph(seqs []int, positions []int32) (err error) {
	defer recoverError(&err)
	ctx := e.model.Backend().NewContext()
	defer ctx.Close()
	n := len(seqs)
	tokens := make([]int32, n)
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(tokens, n),
		Outputs:   ctx.Input().Empty(ml.DTypeI32, e.slots),
		Positions: positions,
		Sequences: seqs,
	}
	t, err := e.graph.forward(ctx, batch, true)
	if err != nil {
		return err
	}
	ctx.Forward(t)
	if e.narrowK > 0 {
		narrow(ctx, t, e.narrowK)
	}
	ctx.SetBatchSize(n)
	ctx.Reserve()
	return nil
}

// prefillPrefix computes the shared prompt prefix into its own cache
// sequence, before any request arrives.
func (e *engine) prefillPrefix() error {
	for start := 0; start < len(e.prefix); start += e.batchSize {
		chunk := e.prefix[start:min(len(e.prefix), start+e.batchSize)]
		if _, err := e.forwardSequence(chunk, int32(start), e.prefixSeq()); err != nil {
			return err
		}
	}
	return nil
}

// forwardSequence computes tokens of one cache sequence, starting at pos,
// and returns the logits of the last one.
func (e *engine) forwardSequence(tokens []int32, pos int32, seqID int) (logits []float32, err error) {
	defer recoverError(&err)
	positions := make([]int32, len(tokens))
	seqs := make([]int, len(tokens))
	for i := range tokens {
		positions[i] = pos + int32(i)
		seqs[i] = seqID
	}
	ctx := e.model.Backend().NewContext()
	defer ctx.Close()
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(tokens, len(tokens)),
		Outputs:   ctx.Input().FromInts([]int32{int32(len(tokens) - 1)}, 1),
		Positions: positions,
		Sequences: seqs,
	}
	ctx.SetBatchSize(len(tokens))
	t, err := e.graph.forward(ctx, batch, false)
	if err != nil {
		return nil, err
	}
	ctx.Compute(t)
	return t.Floats(), nil
}
