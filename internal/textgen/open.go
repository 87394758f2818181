package textgen

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
	"github.com/genq/genq/internal/llamacpp"
	"github.com/genq/genq/internal/procfs"
)

// Open loads the model at start-up. Everything that can make a model
// unservable (not GGUF, an architecture the engine lacks, a chat template
// genq cannot render, too little memory) fails here, in a sentence, never
// on the first request. The engine's load stops when ctx ends.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	return OpenReporting(ctx, cfg, log, nil)
}

// OpenReporting is Open telling progress, when set, how far the engine's
// load of the weights is, from 0 to 1 (llama.cpp's own count: tensors
// placed, or copied to the GPU). A worker of several models shows it in
// its heartbeats.
func OpenReporting(ctx context.Context, cfg Config, log *slog.Logger, progress func(float64)) (*Backend, error) {
	log = cmp.Or(log, slog.Default())
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()

	path, err := gguf.Find(cfg.ModelDir, cfg.ModelFile, "TEXT_MODEL_FILE")
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	lib, err := llamacpp.LoadContext(ctx, cfg.LibDir, log)
	if err != nil {
		return nil, err
	}

	device := llamacpp.BackendDevice(nil)
	availBefore := procfs.AvailableMemory()
	var gpu *llamacpp.Device
	if cfg.GPU {
		gpu = lib.GPU()
	}
	params := llamacpp.ModelParams{}
	var freeBefore uint64
	if gpu != nil {
		params.GPULayers, params.Device = -1, gpu
		device = llamacpp.BackendDevice(gpu)
		freeBefore, _ = gpu.Memory()
		if size := fileSize(path); size > 0 && uint64(size) > freeBefore {
			return nil, fmt.Errorf("text model %s: its %s of weights do not fit in the %s free on %s: use a smaller or more quantized model, or TEXT_GPU=false",
				path, gib(uint64(size)), gib(freeBefore), device.Name)
		}
	}
	params.Progress = func(f float64) bool {
		if progress != nil {
			progress(f)
		}
		return ctx.Err() == nil
	}
	m, err := lib.OpenModel(path, params)
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	ok := false
	tm := &textModel{model: m, vocab: m.Vocab, log: log}
	defer func() {
		if !ok {
			tm.close()
		}
	}()
	arch := m.Architecture()
	tmpl, err := newChatTemplate(m.ChatTemplate(), m.Vocab)
	if err != nil {
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	dialect := tmpl.Dialect()
	tm.preserved = map[int32]bool{}
	for _, text := range dialect.PreservedTokens() {
		if id := m.Vocab.Lookup(text); id >= 0 && m.Vocab.IsControl(id) {
			tm.preserved[id] = true
		}
	}
	if !hasEndOfGeneration(m.Vocab) {
		return nil, fmt.Errorf("text model %s: no end-of-turn token in its vocabulary", path)
	}

	threads := cfg.Threads
	if threads <= 0 {
		threads = defaultThreads(m.Params())
		if threads > 1 && gpu == nil {
			tm.governor = newThreadGovernor(threads)
		}
	}
	tm.threads = threads
	trained := m.TrainedContext()
	var plan *memoryPlan
	share := cpuMemoryShare
	switch {
	case gpu != nil:
		free, _ := gpu.Memory()
		p := newMemoryPlan(m, device.Name, freeBefore, gpuReserve, freeBefore-min(free, freeBefore), cfg.ContextSize, max(cfg.BatchSize, cfg.Slots))
		plan, share = &p, cfg.GPUMemoryUtilization
	case availBefore > 0:
		// The weights are mapped from the file, and count as taken.
		p := newMemoryPlan(m, "this machine's memory", availBefore, cpuReserve, m.Size(), cfg.ContextSize, max(cfg.BatchSize, cfg.Slots))
		p.kvCap = uint64(float64(availBefore) * cpuKVShare)
		plan = &p
	}
	sized, err := planSize(cfg, plan, gpu != nil, share, trained)
	if err != nil {
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	if gpu != nil && cfg.Slots == 0 {
		log.Info("text slots sized from free GPU memory", "slots", sized.slots, "free", gib(plan.free),
			"utilization", cfg.GPUMemoryUtilization, "weights", gib(plan.weights), "kv_per_slot", gib(plan.kvPerSlot()))
	}
	log.Info("text context sized", "asked", sized.asked, "trained", sized.trained, "chosen", sized.context, "slots", sized.slots, "why", sized.why)
	if cfg, err = cfg.withContext(sized.context); err != nil {
		return nil, err
	}
	cfg = cfg.withSlots(sized.slots)
	cfg.Threads = threads
	unified := cfg.KVUnified == "on" || cfg.KVUnified == "auto" && defaultKVUnified
	tm.ctx, err = m.NewContext(llamacpp.ContextParams{
		Cells: (cfg.Slots + 1) * cfg.ContextSize, Sequences: cfg.Slots + 1, Batch: cfg.BatchSize + cfg.Slots,
		Threads: threads, FlashAttention: cfg.FlashAttention, Unified: unified, OffloadKQV: gpu != nil,
	})
	if err != nil {
		if plan != nil {
			err = fmt.Errorf("%w; %w", plan.doesNotFit(cfg.Slots, cfg.GPUMemoryUtilization), err)
		}
		return nil, fmt.Errorf("text model %s: %w", path, err)
	}
	// A step may carry a pad in every idle slot between busy ones (padGaps).
	tm.batch = llamacpp.NewBatch(cfg.BatchSize + cfg.Slots)
	tm.unified = unified
	tm.slots, tm.batchSize, tm.contextSize = cfg.Slots, cfg.BatchSize, cfg.ContextSize
	tm.ignoreEOS, tm.prefixCache = cfg.IgnoreEOS, cfg.PrefixCache == "on"
	tm.deviceTopK = cfg.DeviceSampling == "on" || cfg.DeviceSampling == "auto" && gpu != nil
	b := &Backend{textModel: tm, cfg: cfg, tmpl: tmpl}
	b.constraints = newConstraints(tm, dialect, cfg.SchemaPrepareBudget, schemaCacheBytes(cfg.SchemaCacheMiB, availBefore))
	b.constraints.cache.ClosedObjects = cfg.OtherProperties == "off"
	if trained > 0 && cfg.ContextSize > trained {
		log.Warn("text context is longer than the model was trained for",
			"context", cfg.ContextSize, "trained", trained)
	}

	// With the prefix cache on, a new conversation reuses the system
	// prompt from the cells its slot holds, as llama.cpp's server does, and
	// its prompt is computed as that server computes it. A shared prefix
	// computed apart would split every new prompt into two steps, and on a
	// CPU llama.cpp's flash attention sums in an order that depends on that
	// split: answers would differ from the engine's own by rounding
	// (docs/text.md). Without the cache, it is the only reuse there is.
	if !cfg.noSharedPrefix && !tm.prefixCache {
		b.prefix, err = b.sharedPrefix()
		if err != nil {
			return nil, fmt.Errorf("text model %s: %w", path, err)
		}
	}
	if err := b.prefillPrefix(); err != nil {
		return nil, fmt.Errorf("text model %s: compute the shared prompt prefix: %w", path, err)
	}

	b.info = genq.BackendInfo{Device: device, Model: filepath.Base(path), Slots: cfg.Slots,
		Limits: genq.Limits{MaxNewTokens: cfg.MaxNewTokens, ContextSize: cfg.ContextSize, VocabSize: m.Vocab.Size()}}
	b.sched = newScheduler(tm)
	tenantSteps := cfg.TenantSteps == "on" || cfg.TenantSteps == "auto" && gpu == nil
	if tenantSteps {
		b.sched.shares = newStepShare()
	}
	go b.sched.loop()
	ok = true

	log.Info("text model ready",
		"model", path, "architecture", arch, "tool_format", dialect.String(), "engine", "llama.cpp "+lib.Version,
		"device", device.Kind, "device_name", device.Name, "threads", threads, "kv_unified", unified, "device_sampling", tm.deviceTopK,
		"prefix_cache", tm.prefixCache, "tenant_steps", tenantSteps, "slots", cfg.Slots, "context", cfg.ContextSize, "batch", cfg.BatchSize,
		"shared_prefix_tokens", len(b.prefix), "took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// defaultKVUnified is TEXT_KV_UNIFIED=auto's choice (docs/text.md has the
// measurements behind it).
const defaultKVUnified = false

func hasEndOfGeneration(v *llamacpp.Vocab) bool {
	for id := range v.Size() {
		if v.IsEndOfGeneration(int32(id)) {
			return true
		}
	}
	return false
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

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// smallModelParams is the size below which one compute thread beats
// several: each op of a model this small takes about as long as ggml's
// threads take to meet at the barrier after it (docs/benchmarks.md).
const smallModelParams = 20_000_000

func defaultThreads(params uint64) int {
	if params < smallModelParams {
		return 1
	}
	return runtime.NumCPU()
}
