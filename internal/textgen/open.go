package textgen

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/ollama/ollama/ml"
	_ "github.com/ollama/ollama/ml/backend" // registers the ggml backend
	"github.com/ollama/ollama/model"
	_ "github.com/ollama/ollama/model/models" // registers the architectures
	"github.com/ollama/ollama/tokenizer"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

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
		// flash kernel beats the plain one on real models; on tiny ones its
		// fixed cost per op loses (docs/text.md), and they keep the plain
		// kernel, whose queries streamGraph folds.
		params.FlashAttention = ml.FlashAttentionEnabled
	}
	device := genq.Device{Kind: "cpu", Name: procfs.CPUName(), Engine: "ggml"}
	var plan *memoryPlan
	if cfg.GPU {
		gpu, layers, err := findGPU(path, threads, int(meta.KV().BlockCount()))
		if err != nil {
			return nil, err
		}
		if gpu != nil {
			params.GPULayers = layers
			params.FlashAttention = ml.FlashAttentionEnabled
			device = genq.Device{Kind: "cuda", Name: cmp.Or(gpu.Description, gpu.Name), Engine: "ggml"}
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
	tm := &textModel{model: m, log: log, slots: cfg.Slots, batchSize: cfg.BatchSize,
		maxNewTokens: cfg.MaxNewTokens, ignoreEOS: cfg.IgnoreEOS, pipeline: cfg.pipeline,
		prefixCache: cfg.PrefixCache == "on", contextSize: cfg.ContextSize}
	b := &Backend{textModel: tm, cfg: cfg, tmpl: tmpl}
	switch {
	case cfg.Narrow == "device":
		b.narrowK, b.narrowMinRows = cfg.narrowCandidates(), 1
	case cfg.Narrow == "auto" && device.IsCUDA():
		// One row is cheaper copied whole to the host than sorted on the
		// device; from two rows on, narrowing wins (docs/text.md).
		b.narrowK, b.narrowMinRows = cfg.narrowCandidates(), 2
	}
	ok := false
	defer func() {
		if !ok {
			tm.close()
		}
	}()

	tok, isTok := m.(tokenizer.Tokenizer)
	if !isTok {
		return nil, fmt.Errorf("text model %s: architecture %q has no tokenizer", path, arch)
	}
	b.tok = tok
	b.vocab = newVocabInfo(tok.Vocabulary())
	b.constraints = newConstraints(tok, b.vocab)
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

	b.info = genq.BackendInfo{Device: device, Model: filepath.Base(path), Slots: cfg.Slots,
		Limits: genq.Limits{MaxNewTokens: cfg.MaxNewTokens, ContextSize: cfg.ContextSize, VocabSize: len(b.vocab.control)}}
	b.sched = newScheduler(tm)
	go b.sched.loop()
	ok = true

	log.Info("text model ready",
		"model", path, "architecture", arch, "template", tmpl.name,
		"device", device.Kind, "device_name", device.Name, "threads", threads, "pipeline", cfg.pipeline,
		"narrow_top_k", b.narrowK, "prefix_cache", tm.prefixCache,
		"slots", cfg.Slots, "context", cfg.ContextSize, "batch", cfg.BatchSize,
		"shared_prefix_tokens", len(b.prefix), "took", time.Since(start).Round(time.Millisecond))
	return b, nil
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
// threads take to meet at the barrier after it: the tiny model runs faster
// on one thread than on two, the mid one faster on two (docs/benchmarks.md).
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
