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

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/onnx/scheduler"
	"github.com/genq/genq/internal/onnx/tokenizer"
	"github.com/genq/genq/internal/worker"
)

// Token lengths SD3 encodes prompts to (diffusers' defaults).
const (
	clipTokens = 77
	t5Tokens   = 256
)

// SD3's VAE latent scaling, used when vae_decoder/config.json lacks it.
const (
	sd3ScalingFactor = 1.5305
	sd3ShiftFactor   = 0.0609
)

// Backend runs one SD3 export. Its sessions are shared by all concurrent
// Generate calls: ONNX Runtime sessions are safe for concurrent Run.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	info   genq.BackendInfo
	sched  scheduler.FlowMatchEuler
	clipL  *tokenizer.CLIP
	clipG  *tokenizer.CLIP
	t5     *tokenizer.T5
	vae    vaeScaling
	shapes shapes

	textL, textG, textT5, transformer, vaeDecoder *session

	// negative is the embedding of the empty negative prompt, the same for
	// every request, so it is computed once at Open.
	negative embedding
}

var _ worker.Backend = (*Backend)(nil)

// shapes are the widths the pipeline reads from the graphs.
type shapes struct {
	latentChannels int64
	clipLHidden    string // output name of hidden_states[-2]
	clipGHidden    string
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
	b.info = genq.BackendInfo{Device: device, Model: name, Slots: cfg.Slots}

	if err := b.loadModels(device.IsCUDA()); err != nil {
		b.Close()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		b.Close()
		return nil, err
	}
	// Encoding the negative prompt also proves the text encoders run.
	b.negative, err = b.encodePrompt(ctx, nil, "")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("encoding the negative prompt: %w", err)
	}
	log.Info("image backend ready", "model", name, "device", device.Kind, "device_name", device.Name,
		"size", fmt.Sprintf("%dx%d", cfg.Width, cfg.Height), "steps", cfg.Steps, "slots", cfg.Slots,
		"took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// readConfigs reads the JSON files and tokenizers of the export and returns
// the model's name.
func (b *Backend) readConfigs() (string, error) {
	dir := b.cfg.ModelDir
	var index struct {
		Class string `json:"_class_name"`
		Name  string `json:"_name_or_path"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "model_index.json"))
	if err != nil {
		return "", fmt.Errorf("model dir %s: %w (want a diffusers-layout ONNX export, as optimum-cli export onnx writes)", dir, err)
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return "", fmt.Errorf("model dir %s: model_index.json: %w", dir, err)
	}
	if index.Class != "StableDiffusion3Pipeline" {
		return "", fmt.Errorf("model dir %s: pipeline %q is not supported, want StableDiffusion3Pipeline", dir, index.Class)
	}
	if b.sched, err = scheduler.Load(filepath.Join(dir, "scheduler", "scheduler_config.json")); err != nil {
		return "", err
	}
	b.vae = vaeScaling{Scaling: sd3ScalingFactor, Shift: sd3ShiftFactor}
	if raw, err := os.ReadFile(filepath.Join(dir, "vae_decoder", "config.json")); err == nil {
		if err := json.Unmarshal(raw, &b.vae); err != nil {
			return "", fmt.Errorf("model dir %s: vae_decoder/config.json: %w", dir, err)
		}
		if b.vae.Scaling == 0 {
			return "", fmt.Errorf("model dir %s: vae_decoder/config.json: scaling_factor is 0", dir)
		}
	}
	if b.clipL, err = tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer")); err != nil {
		return "", fmt.Errorf("model dir %s: tokenizer: %w", dir, err)
	}
	if b.clipG, err = tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer_2")); err != nil {
		return "", fmt.Errorf("model dir %s: tokenizer_2: %w", dir, err)
	}
	if b.t5, err = tokenizer.LoadT5(filepath.Join(dir, "tokenizer_3")); err != nil {
		return "", fmt.Errorf("model dir %s: tokenizer_3: %w", dir, err)
	}
	name := index.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	return name, nil
}

// loadModels inspects every part, checks the parts against each other, and
// only then creates the sessions (the expensive step).
func (b *Backend) loadModels(cuda bool) error {
	dir := b.cfg.ModelDir
	ids := []tensorSpec{{"input_ids", 2, intTypes}}
	models := map[string]*model{}
	var problems []error
	for _, part := range []string{"text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae_decoder"} {
		m, err := inspectModel(dir, part)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		models[part] = m
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("model dir %s: %w", dir, err)
	}
	L, G, T5, tr, vae := models["text_encoder"], models["text_encoder_2"], models["text_encoder_3"], models["transformer"], models["vae_decoder"]

	var err error
	if b.shapes.clipLHidden, err = L.penultimateHiddenState(); err != nil {
		return err
	}
	if b.shapes.clipGHidden, err = G.penultimateHiddenState(); err != nil {
		return err
	}
	clipOut := func(hidden string) []tensorSpec {
		return []tensorSpec{{"text_embeds", 2, floatTypes}, {hidden, 3, floatTypes}}
	}
	checks := []error{
		L.check(ids, clipOut(b.shapes.clipLHidden)),
		G.check(ids, clipOut(b.shapes.clipGHidden)),
		T5.check(ids, []tensorSpec{{"last_hidden_state", 3, floatTypes}}),
		tr.check([]tensorSpec{
			{"hidden_states", 4, floatTypes}, {"encoder_hidden_states", 3, floatTypes},
			{"pooled_projections", 2, floatTypes}, {"timestep", 1, timestepTypes},
		}, []tensorSpec{{"out_hidden_states", 4, floatTypes}}),
		vae.check([]tensorSpec{{"latent_sample", 4, floatTypes}}, []tensorSpec{{"sample", 4, floatTypes}}),
	}
	if err := errors.Join(checks...); err != nil {
		return fmt.Errorf("model dir %s: %w", dir, err)
	}
	if err := b.checkWidths(L, G, T5, tr, vae); err != nil {
		return fmt.Errorf("model dir %s: %w", dir, err)
	}

	opts, err := newSessionOptions(cuda, b.cfg.Threads)
	if err != nil {
		return err
	}
	defer opts.Destroy()
	open := func(m *model, outputs ...string) (*session, error) {
		s, err := ort.NewDynamicAdvancedSession(m.path, m.order, outputs, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: loading %s: %w", m.part, m.path, err)
		}
		return &session{model: m, s: s, inNames: m.order, outNames: outputs}, nil
	}
	for _, load := range []struct {
		dst     **session
		m       *model
		outputs []string
	}{
		{&b.textL, L, []string{"text_embeds", b.shapes.clipLHidden}},
		{&b.textG, G, []string{"text_embeds", b.shapes.clipGHidden}},
		{&b.textT5, T5, []string{"last_hidden_state"}},
		{&b.transformer, tr, []string{"out_hidden_states"}},
		{&b.vaeDecoder, vae, []string{"sample"}},
	} {
		if *load.dst, err = open(load.m, load.outputs...); err != nil {
			return err
		}
	}
	return nil
}

// checkWidths compares the widths the parts declare, where they declare
// them, so a mixed-up export fails at start-up rather than at the first
// request.
func (b *Backend) checkWidths(L, G, T5, tr, vae *model) error {
	b.shapes.latentChannels = tr.dim("hidden_states", 1)
	if b.shapes.latentChannels <= 0 {
		return fmt.Errorf("transformer: input hidden_states has no fixed channel count (shape %v)", tr.inputs["hidden_states"].Dimensions)
	}
	var problems []error
	if c := vae.dim("latent_sample", 1); c > 0 && c != b.shapes.latentChannels {
		problems = append(problems, fmt.Errorf("vae_decoder takes %d latent channels, the transformer makes %d", c, b.shapes.latentChannels))
	}
	if c := tr.dim("out_hidden_states", 1); c > 0 && c != b.shapes.latentChannels {
		problems = append(problems, fmt.Errorf("transformer outputs %d channels but takes %d", c, b.shapes.latentChannels))
	}
	joint := tr.dim("encoder_hidden_states", 2)
	wl, wg := L.dim(b.shapes.clipLHidden, 2), G.dim(b.shapes.clipGHidden, 2)
	for _, enc := range []struct {
		m      *model
		hidden string
		width  int64
	}{{L, b.shapes.clipLHidden, wl}, {G, b.shapes.clipGHidden, wg}} {
		if enc.width <= 0 {
			problems = append(problems, fmt.Errorf("%s: output %s has no fixed width (shape %v)", enc.m.part, enc.hidden, enc.m.outputs[enc.hidden].Dimensions))
		}
		// text_embeds' width: the graph's, else config.json's projection_dim,
		// else the hidden width (they are equal in SD3's CLIPs).
		if enc.m.dim("text_embeds", 1) <= 0 {
			enc.m.widths["text_embeds"] = enc.width
			if p := enc.m.projectionDim(); p > 0 {
				enc.m.widths["text_embeds"] = p
			}
		}
	}
	if wt := T5.dim("last_hidden_state", 2); joint > 0 && wt > 0 && wt != joint {
		problems = append(problems, fmt.Errorf("text_encoder_3 is %d wide, the transformer's encoder_hidden_states %d", wt, joint))
	}
	if joint > 0 && wl > 0 && wg > 0 && wl+wg > joint {
		problems = append(problems, fmt.Errorf("text_encoder and text_encoder_2 are %d+%d wide, more than the transformer's encoder_hidden_states (%d)", wl, wg, joint))
	}
	pl, pg, pooled := L.dim("text_embeds", 1), G.dim("text_embeds", 1), tr.dim("pooled_projections", 1)
	pl, pg = max(pl, L.widths["text_embeds"]), max(pg, G.widths["text_embeds"])
	if pl > 0 && pg > 0 && pooled > 0 && pl+pg != pooled {
		problems = append(problems, fmt.Errorf("text_embeds of text_encoder and text_encoder_2 are %d+%d wide, but the transformer takes pooled_projections %d wide", pl, pg, pooled))
	}
	// Exports with a fixed sequence length dictate it; SD3's defaults otherwise.
	b.shapes.clipLen, b.shapes.t5Len = clipTokens, t5Tokens
	if n := L.dim("input_ids", 1); n > 0 {
		b.shapes.clipLen = n
	}
	if n := G.dim("input_ids", 1); n > 0 && n != b.shapes.clipLen {
		problems = append(problems, fmt.Errorf("text_encoder takes %d tokens, text_encoder_2 %d", b.shapes.clipLen, n))
	}
	if n := T5.dim("input_ids", 1); n > 0 {
		b.shapes.t5Len = n
	}
	return errors.Join(problems...)
}

// Info says which device and model the backend runs.
func (b *Backend) Info() genq.BackendInfo { return b.info }

// Close frees the sessions. ONNX Runtime's process-wide environment stays,
// for other backends in the process.
func (b *Backend) Close() error {
	var errs []error
	for _, s := range []*session{b.textL, b.textG, b.textT5, b.transformer, b.vaeDecoder} {
		if s != nil && s.s != nil {
			errs = append(errs, s.s.Destroy())
			s.s = nil
		}
	}
	return errors.Join(errs...)
}
