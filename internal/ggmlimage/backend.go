package ggmlimage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/diffusion/scheduler"
	"github.com/genq/genq/internal/diffusion/tokenizer"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// Engine names ggml in the worker's heartbeat and logs.
const Engine = "ggml"

// Token lengths prompts are encoded to (diffusers' defaults).
const (
	clipTokens = 77
	t5Tokens   = 256
)

// Backend runs SD3 on ggml: the model directory's tokenizers and scheduler
// config (the diffusers layout the ONNX engine reads) and its ggml/*.gguf
// parts. It implements genq.Backend.
type Backend struct {
	cfg  Config
	log  *slog.Logger
	info genq.BackendInfo

	flow         scheduler.FlowMatchEuler
	clipL, clipG *tokenizer.CLIP
	t5tok        *tokenizer.T5

	textL, textG *CLIP
	t5           *T5 // nil with Config.NoT5
	mmdit        *Transformer
	vae          *VAEDecoder
	be           *tensor.Backend // the device all parts compute on
	bfloat16     bool            // Config.BFloat16 as it resolved on the device
	steps        *stepBatcher    // the transformer's calls, shared by concurrent jobs

	// negative is the empty negative prompt, encoded once at Open.
	negative embedding

	onStep func(step int, latents []float32) // ObserveSteps
	mu     *sync.Mutex                       // the parts' one graph at a time
}

// ObserveSteps has f see the latents after every denoising step of every
// later job (tests compare the engines step by step with it). Call it
// before any Generate.
func (b *Backend) ObserveSteps(f func(step int, latents []float32)) { b.onStep = f }

var _ genq.Backend = (*Backend)(nil)

// embedding is one prompt encoded for the transformer.
type embedding struct {
	seq    []float32 // [seqLen, JointDim]
	seqLen int
	pooled []float32
}

// Open loads the model and checks that its parts fit together; a missing
// or misshapen tensor stops it with one line naming the tensor.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	start := time.Now()
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	cfg.Pipeline = cfg.Pipeline.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.NoT5 = cfg.NoT5 || cfg.T5Off()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := cfg.ModelDir
	b := &Backend{cfg: cfg, log: log}
	name, err := b.readConfigs()
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	if cfg.Threads == 0 {
		cfg.Threads = defaultThreads(filepath.Join(dir, sd3.TransformerFile))
		b.cfg.Threads = cfg.Threads
	}
	if b.be, err = tensor.Open(tensor.Options{Device: cfg.Device, Threads: cfg.Threads, AttentionGroups: cfg.AttentionGroups, GraphsFor: cfg.GraphsFor,
		BLAS: cfg.BLAS, BLASKernels: cfg.BLASKernels, Log: log}); err != nil {
		return nil, fmt.Errorf("image device %s: %w", cfg.Device, err)
	}
	b.bfloat16 = cfg.BFloat16 == BFloat16On || (cfg.BFloat16 != BFloat16Off && b.be.FastBFloat16())
	// With bfloat16 matrices on ggml's kernels and more than one thread,
	// the attention's products on OpenBLAS would put its threads beside
	// ggml's, each pool spinning while the other works: a step's time
	// varied twofold, where with every product on ggml's kernels it was
	// steady and shorter (docs/benchmarks.md). One thread keeps OpenBLAS,
	// faster there; so does an explicit IMAGE_BLAS=on.
	if b.bfloat16 && cfg.Threads > 1 && cmp.Or(cfg.BLAS, tensor.BLASAuto) == tensor.BLASAuto {
		b.be.DropBLAS()
	}
	dev := b.be.Device()
	device := genq.Device{Kind: dev.Kind, Name: cmp.Or(dev.Name, procfs.CPUName()), Engine: Engine}
	b.mu = new(sync.Mutex)
	opts := placement{be: b.be, mu: b.mu, fresh: cfg.FreshStepGraphs, bfloat16: b.bfloat16}
	at := func(file string) string { return filepath.Join(dir, file) }
	if b.textL, err = openCLIP(at(sd3.ClipLFile), opts); err != nil {
		return nil, err
	}
	if b.textG, err = openCLIP(at(sd3.ClipGFile), opts); err != nil {
		return nil, err
	}
	if !cfg.NoT5 {
		if b.t5, err = openT5(at(sd3.T5File), opts); err != nil {
			return nil, err
		}
	}
	if b.mmdit, err = openTransformer(at(sd3.TransformerFile), opts); err != nil {
		return nil, err
	}
	if b.vae, err = openVAEDecoder(at(sd3.VAEDecoderFile), opts); err != nil {
		return nil, err
	}
	if err := b.checkWidths(); err != nil {
		return nil, err
	}
	if cfg.MaxBatch == 0 {
		files := []string{at(sd3.ClipLFile), at(sd3.ClipGFile), at(sd3.TransformerFile), at(sd3.VAEDecoderFile)}
		if !cfg.NoT5 {
			files = append(files, at(sd3.T5File))
		}
		cfg.MaxBatch = memoryBatch(b.mmdit.cfg, cmp.Or(cfg.MaxSize, cfg.Width, cfg.Height), cfg.Slots, freeBytes(dev, files))
		b.cfg.MaxBatch = cfg.MaxBatch
	}
	b.steps = newStepBatcher(b.mmdit, cfg.MaxBatch)
	b.info = genq.BackendInfo{Device: device, Model: name, Slots: cfg.Slots,
		Limits: genq.Limits{ImageMaxSize: cfg.MaxSize, ImageMaxSteps: cfg.MaxSteps}}
	if b.negative, err = b.encodePrompt(""); err != nil {
		return nil, fmt.Errorf("encoding the negative prompt: %w", err)
	}
	ok = true
	log.Info("image backend ready", "engine", Engine, "model", name, "device", device.Kind, "device_name", device.Name,
		"compute_capability", dev.ComputeCapability, "blas", dev.BLAS, "bfloat16", opts.bfloat16, "t5", !cfg.NoT5, "threads", cfg.Threads, "max_batch", cfg.MaxBatch, "size", fmt.Sprintf("%dx%d", cfg.Width, cfg.Height), "steps", cfg.Steps, "slots", cfg.Slots,
		"took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// smallModelBytes is the transformer file size below which one CPU thread
// beats several: each op of a model this small takes about as long as
// ggml's threads take to meet after it, and far longer on a shared CPU
// (docs/benchmarks.md), as the text engine found for small models.
const smallModelBytes = 80 << 20

// defaultThreads is IMAGE_THREADS=0's thread count: one for a small model,
// every core otherwise.
func defaultThreads(transformer string) int {
	if fi, err := os.Stat(transformer); err == nil && fi.Size() < smallModelBytes {
		return 1
	}
	return runtime.NumCPU()
}

// readConfigs reads the tokenizers and scheduler config and returns the
// model's name.
func (b *Backend) readConfigs() (string, error) {
	dir := b.cfg.ModelDir
	index, err := diffusion.ReadModelIndex(dir, "the diffusers layout with ggml/*.gguf beside it: genqctl download --variant C --engine ggml")
	if err != nil {
		return "", err
	}
	if index.Class != "StableDiffusion3Pipeline" {
		return "", fmt.Errorf("model dir %s: pipeline %q: the ggml engine runs StableDiffusion3Pipeline", dir, index.Class)
	}
	if b.flow, err = scheduler.Load(filepath.Join(dir, "scheduler", "scheduler_config.json")); err != nil {
		return "", err
	}
	if b.clipL, err = tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer")); err != nil {
		return "", fmt.Errorf("model dir %s: tokenizer: %w", dir, err)
	}
	if b.clipG, err = tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer_2")); err != nil {
		return "", fmt.Errorf("model dir %s: tokenizer_2: %w", dir, err)
	}
	if !b.cfg.NoT5 {
		if b.t5tok, err = tokenizer.LoadT5(filepath.Join(dir, "tokenizer_3")); err != nil {
			return "", fmt.Errorf("model dir %s: tokenizer_3: %w", dir, err)
		}
	}
	return index.Name, nil
}

// checkWidths checks that the parts' widths fit together.
func (b *Backend) checkWidths() error {
	m, l, g, v := b.mmdit.Config(), b.textL.Config(), b.textG.Config(), b.vae.Config()
	var problems []error
	if l.Width+g.Width > m.JointDim {
		problems = append(problems, fmt.Errorf("clip widths %d+%d do not fit the transformer's text width %d", l.Width, g.Width, m.JointDim))
	}
	if l.Projection+g.Projection != m.PooledDim {
		problems = append(problems, fmt.Errorf("clip projections %d+%d are not the transformer's pooled width %d", l.Projection, g.Projection, m.PooledDim))
	}
	if b.t5 != nil && b.t5.Config().Width != m.JointDim {
		problems = append(problems, fmt.Errorf("t5 width %d is not the transformer's text width %d", b.t5.Config().Width, m.JointDim))
	}
	if m.OutChannels != v.LatentChannels || m.InChannels != v.LatentChannels {
		problems = append(problems, fmt.Errorf("transformer channels %d/%d are not the vae's %d", m.InChannels, m.OutChannels, v.LatentChannels))
	}
	if v.Upscale()*m.PatchSize > 16 {
		problems = append(problems, fmt.Errorf("vae upscale %d × patch %d is more than 16", v.Upscale(), m.PatchSize))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("model dir %s: %w", b.cfg.ModelDir, err)
	}
	return nil
}

// TransformerCalls is how many transformer calls the backend has made: with
// concurrent jobs, fewer than their steps together.
func (b *Backend) TransformerCalls() int64 { return b.steps.calls.Load() }

// Profile has the ggml backend time every operation of later graphs,
// one at a time (tensor.Backend.Profile), for benchmarks that look for
// where an image's time goes; Profiled returns the sums. Not for serving:
// each operation then waits for the device.
func (b *Backend) Profile(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.be.Profile(on)
}

// Profiled is what Profile has timed, the most time first.
func (b *Backend) Profiled() []tensor.OpTime {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.be.Profiled()
}

// Info says which engine, device and model serve.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// BLAS names the library and kernels that compute the CPU's matrix
// products (tensor.Device.BLAS); empty: ggml's own, or a GPU.
func (b *Backend) BLAS() string { return b.be.Device().BLAS }

// BFloat16 says whether the largest products' weights are bfloat16
// (Config.BFloat16, auto resolved on the device).
func (b *Backend) BFloat16() bool { return b.bfloat16 }

// Close frees every part.
func (b *Backend) Close() error {
	if b.steps != nil {
		b.steps.close()
	}
	b.textL.Close()
	b.textG.Close()
	b.t5.Close()
	b.mmdit.Close()
	b.vae.Close()
	b.be.Close()
	return nil
}
