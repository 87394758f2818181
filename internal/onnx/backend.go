package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/diffusion/scheduler"
	"github.com/genq/genq/internal/diffusion/tokenizer"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

// Engine names ONNX Runtime in the worker's heartbeat and logs.
const Engine = "onnxruntime"

// Token lengths prompts are encoded to (diffusers' defaults).
const (
	clipTokens = 77
	t5Tokens   = 256
)

// SD3's VAE latent scaling, used when vae_decoder/config.json lacks it.
const (
	sd3ScalingFactor = 1.5305
	sd3ShiftFactor   = 0.0609
)

// Backend runs one diffusion export: SD3 (variant C), or SD 1.5
// and SDXL UNet exports. Its sessions are shared by all concurrent Generate
// calls: ONNX Runtime sessions are safe for concurrent Run.
type Backend struct {
	cfg  Config
	log  *slog.Logger
	info genq.BackendInfo
	kind *pipelineKind

	flow  scheduler.FlowMatchEuler // SD3
	euler scheduler.EulerDiscrete  // UNet pipelines

	clipL, clipG *tokenizer.CLIP
	t5           *tokenizer.T5
	vae          vaeScaling
	shapes       shapes

	// Sessions; a pipeline without a part leaves it nil.
	textL, textG, textT5, denoiser, vaeDecoder *session

	// negative is the embedding of the empty negative prompt, the same for
	// every request, so it is computed once at Open.
	negative embedding

	onStep func(step int, latents []float32) // ObserveSteps
}

// ObserveSteps has f see the latents after every denoising step of every
// later job (tests compare the engines step by step with it). Call it
// before any Generate.
func (b *Backend) ObserveSteps(f func(step int, latents []float32)) { b.onStep = f }

var _ genq.Backend = (*Backend)(nil)

// shapes are what the pipeline reads from the graphs.
type shapes struct {
	latentChannels int64
	clipLOut       string // the CLIP-L output taken: hidden_states[-2], or last_hidden_state (SD 1.5)
	clipGOut       string // hidden_states[-2] of CLIP-G
	clipLen, t5Len int64
}

type vaeScaling struct {
	Scaling float64 `json:"scaling_factor"`
	Shift   float64 `json:"shift_factor"`
}

// session is one loaded model with the input and output names it is run
// with.
type session struct {
	*model
	s        *ort.DynamicAdvancedSession
	inNames  []string
	outNames []string
}

// Open loads the export in cfg.ModelDir and checks that its parts fit
// together. Any missing or mismatched part is an error that says which.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	start := time.Now()
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := initRuntime(cfg.LibraryPath); err != nil {
		return nil, err
	}
	device, err := chooseDevice(cfg.Device, cfg.Threads)
	if errors.Is(err, errCUDAFallback) {
		log.Warn("image backend: CUDA unavailable", "err", err)
	} else if err != nil {
		return nil, err
	}

	b := &Backend{cfg: cfg, log: log}
	name, err := b.readConfigs()
	if err != nil {
		return nil, err
	}
	device.Engine = Engine
	b.info = genq.BackendInfo{Device: device, Model: name, Slots: cfg.Slots,
		Limits: genq.Limits{ImageMaxSize: cfg.MaxSize, ImageMaxSteps: cfg.MaxSteps}}

	err = b.loadModels(device.IsCUDA())
	if err != nil && errors.Is(err, errSession) && device.IsCUDA() && cfg.Device == DeviceAuto {
		// The CUDA provider loaded but cannot run the models (missing cuDNN,
		// too little memory): the CPU still can.
		log.Warn("image backend: CUDA sessions failed, running on the CPU", "err", err)
		b.Close()
		device = genq.Device{Kind: "cpu", Name: procfs.CPUName(), Engine: Engine}
		b.info.Device = device
		err = b.loadModels(false)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		b.Close()
		return nil, err
	}
	// The empty negative prompt serves every job that gives none, so it is
	// encoded once. Encoding it also proves the text encoders run.
	b.negative, err = b.encodePrompt(ctx, nil, "")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("encoding the negative prompt: %w", err)
	}
	log.Info("image backend ready", "engine", Engine, "model", name, "pipeline", b.kind.name, "device", device.Kind, "device_name", device.Name,
		"size", fmt.Sprintf("%dx%d", cfg.Width, cfg.Height), "steps", cfg.Steps, "slots", cfg.Slots,
		"took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// readConfigs reads the JSON files and tokenizers of the export and returns
// the model's name.
func (b *Backend) readConfigs() (string, error) {
	dir := b.cfg.ModelDir
	index, err := diffusion.ReadModelIndex(dir, "a diffusers-layout ONNX export, as optimum-cli export onnx writes")
	if err != nil {
		return "", err
	}
	var ok bool
	if b.kind, ok = kindOf(index.Class); !ok {
		return "", fmt.Errorf("model dir %s: pipeline %q is not supported, want StableDiffusion3Pipeline, StableDiffusionXLPipeline or StableDiffusionPipeline", dir, index.Class)
	}
	// SDXL's force_zeros_for_empty_prompt does not apply: it zeroes only a
	// negative prompt that is None, and genq's is "".

	schedPath := filepath.Join(dir, "scheduler", "scheduler_config.json")
	if b.kind.isUNet() {
		var class string
		if b.euler, class, err = scheduler.LoadEuler(schedPath); err != nil {
			return "", err
		}
		if class != "EulerDiscreteScheduler" {
			b.log.Info("image backend: running the export's scheduler config with the Euler discrete scheduler", "configured", class)
		}
	} else if b.flow, err = scheduler.Load(schedPath); err != nil {
		return "", err
	}

	b.vae = vaeScaling{Scaling: b.kind.scaling, Shift: b.kind.shift}
	if raw, err := os.ReadFile(filepath.Join(dir, "vae_decoder", "config.json")); err == nil {
		if err := json.Unmarshal(raw, &b.vae); err != nil {
			return "", fmt.Errorf("model dir %s: vae_decoder/config.json: %w", dir, err)
		}
		if b.vae.Scaling == 0 {
			return "", fmt.Errorf("model dir %s: vae_decoder/config.json: scaling_factor is 0", dir)
		}
	}

	for i, tokDir := range b.kind.tokenizers {
		path := filepath.Join(dir, tokDir)
		switch i {
		case 0:
			b.clipL, err = tokenizer.LoadCLIP(path)
		case 1:
			b.clipG, err = tokenizer.LoadCLIP(path)
		case 2:
			b.t5, err = tokenizer.LoadT5(path)
		}
		if err != nil {
			return "", fmt.Errorf("model dir %s: %s: %w", dir, tokDir, err)
		}
	}
	return index.Name, nil
}

// Info says which device and model the backend runs.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// Close frees the sessions. ONNX Runtime's process-wide environment stays,
// for other backends in the process.
func (b *Backend) Close() error {
	var errs []error
	for _, s := range []*session{b.textL, b.textG, b.textT5, b.denoiser, b.vaeDecoder} {
		if s != nil && s.s != nil {
			errs = append(errs, s.s.Destroy())
			s.s = nil
		}
	}
	return errors.Join(errs...)
}
