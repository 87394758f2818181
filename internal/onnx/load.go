package onnx

import (
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// errSession marks a failure to create a session from a model that passed
// the checks: a device problem more likely than an export problem.
var errSession = errors.New("onnx runtime session")

// loadModels inspects every part, checks the parts against each other, and
// only then creates the sessions (the expensive step).
func (b *Backend) loadModels(cuda bool) error {
	dir := b.cfg.ModelDir
	k := b.kind
	parts := append(append([]string(nil), k.textParts...), k.denoiser, "vae_decoder")
	models := map[string]*model{}
	var problems []error
	for _, part := range parts {
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
	L, G, T5 := models["text_encoder"], models["text_encoder_2"], models["text_encoder_3"]
	den, vae := models[k.denoiser], models["vae_decoder"]

	// Which CLIP outputs the pipeline takes.
	var err error
	var outputs = map[*model][]string{}
	if k == kindSD15 {
		b.shapes.clipLOut = "last_hidden_state"
		outputs[L] = []string{"last_hidden_state"}
	} else {
		if b.shapes.clipLOut, err = L.penultimateHiddenState(); err != nil {
			return err
		}
		if b.shapes.clipGOut, err = G.penultimateHiddenState(); err != nil {
			return err
		}
		outputs[G] = []string{"text_embeds", b.shapes.clipGOut}
		outputs[L] = []string{b.shapes.clipLOut}
		if k == kindSD3 {
			outputs[L] = []string{"text_embeds", b.shapes.clipLOut}
			outputs[T5] = []string{"last_hidden_state"}
		}
	}

	ids := []tensorSpec{{"input_ids", 2, intTypes}}
	var checks []error
	for m, outs := range outputs {
		var specs []tensorSpec
		for _, name := range outs {
			rank := 3
			if name == "text_embeds" {
				rank = 2
			}
			specs = append(specs, tensorSpec{name, rank, floatTypes})
		}
		checks = append(checks, m.check(ids, specs))
	}
	io := k.io
	denIn := []tensorSpec{{io.latent, 4, floatTypes}, {io.text, 3, floatTypes}, {io.timestep, rankScalarOrBatch, timestepTypes}}
	if io.pooled != "" {
		denIn = append(denIn, tensorSpec{io.pooled, 2, floatTypes})
	}
	if io.timeIDs != "" {
		denIn = append(denIn, tensorSpec{io.timeIDs, 2, floatTypes})
	}
	checks = append(checks,
		den.check(denIn, []tensorSpec{{io.out, 4, floatTypes}}),
		vae.check([]tensorSpec{{"latent_sample", 4, floatTypes}}, []tensorSpec{{"sample", 4, floatTypes}}),
	)
	if ts := den.inputs[io.timestep]; len(ts.Dimensions) == 0 && ts.DataType == ort.TensorElementDataTypeFloat16 {
		checks = append(checks, fmt.Errorf("%s: an fp16 scalar timestep cannot be fed through onnxruntime_go", den.part))
	}
	if err := errors.Join(checks...); err != nil {
		return fmt.Errorf("model dir %s: %w", dir, err)
	}
	if err := b.checkWidths(L, G, T5, den, vae); err != nil {
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
			return nil, fmt.Errorf("%w: %s: loading %s: %w", errSession, m.part, m.path, err)
		}
		return &session{model: m, s: s, inNames: m.order, outNames: outputs}, nil
	}
	loads := []struct {
		dst     **session
		m       *model
		outputs []string
	}{
		{&b.textL, L, outputs[L]},
		{&b.textG, G, outputs[G]},
		{&b.textT5, T5, outputs[T5]},
		{&b.denoiser, den, []string{io.out}},
		{&b.vaeDecoder, vae, []string{"sample"}},
	}
	for _, load := range loads {
		if load.m == nil {
			continue
		}
		if *load.dst, err = open(load.m, load.outputs...); err != nil {
			return err
		}
	}
	return nil
}

// checkWidths compares the widths the parts declare, where they declare
// them, so a mixed-up export fails at start-up rather than at the first
// request. L, G and T5 may be nil for pipelines without them.
func (b *Backend) checkWidths(L, G, T5, den, vae *model) error {
	io := b.kind.io
	b.shapes.latentChannels = den.dim(io.latent, 1)
	if b.shapes.latentChannels <= 0 {
		return fmt.Errorf("%s: input %s has no fixed channel count (shape %v)", den.part, io.latent, den.inputs[io.latent].Dimensions)
	}
	var problems []error
	if c := vae.dim("latent_sample", 1); c > 0 && c != b.shapes.latentChannels {
		problems = append(problems, fmt.Errorf("vae_decoder takes %d latent channels, the %s makes %d", c, den.part, b.shapes.latentChannels))
	}
	if c := den.dim(io.out, 1); c > 0 && c != b.shapes.latentChannels {
		problems = append(problems, fmt.Errorf("%s outputs %d channels but takes %d", den.part, c, b.shapes.latentChannels))
	}

	textWidth := den.dim(io.text, 2)
	wl := L.dim(b.shapes.clipLOut, 2)
	if wl <= 0 {
		problems = append(problems, fmt.Errorf("%s: output %s has no fixed width (shape %v)", L.part, b.shapes.clipLOut, L.outputs[b.shapes.clipLOut].Dimensions))
	}
	var wg int64
	if G != nil {
		if wg = G.dim(b.shapes.clipGOut, 2); wg <= 0 {
			problems = append(problems, fmt.Errorf("%s: output %s has no fixed width (shape %v)", G.part, b.shapes.clipGOut, G.outputs[b.shapes.clipGOut].Dimensions))
		}
	}
	// text_embeds' width: the graph's, else config.json's projection_dim,
	// else the hidden width (they are equal in SD3's and SDXL's CLIPs).
	for _, enc := range []struct {
		m     *model
		width int64
	}{{L, wl}, {G, wg}} {
		if enc.m == nil || enc.m.outputs["text_embeds"].Name == "" || enc.m.dim("text_embeds", 1) > 0 {
			continue
		}
		enc.m.widths["text_embeds"] = enc.width
		if p := enc.m.projectionDim(); p > 0 {
			enc.m.widths["text_embeds"] = p
		}
	}
	embeds := func(m *model) int64 { return max(m.dim("text_embeds", 1), m.widths["text_embeds"]) }
	pooled := den.dim(io.pooled, 1)

	switch b.kind {
	case kindSD3:
		if wt := T5.dim("last_hidden_state", 2); textWidth > 0 && wt > 0 && wt != textWidth {
			problems = append(problems, fmt.Errorf("text_encoder_3 is %d wide, the transformer's encoder_hidden_states %d", wt, textWidth))
		}
		if textWidth > 0 && wl > 0 && wg > 0 && wl+wg > textWidth {
			problems = append(problems, fmt.Errorf("text_encoder and text_encoder_2 are %d+%d wide, more than the transformer's encoder_hidden_states (%d)", wl, wg, textWidth))
		}
		if pl, pg := embeds(L), embeds(G); pl > 0 && pg > 0 && pooled > 0 && pl+pg != pooled {
			problems = append(problems, fmt.Errorf("text_embeds of text_encoder and text_encoder_2 are %d+%d wide, but the transformer takes pooled_projections %d wide", pl, pg, pooled))
		}
	case kindSDXL:
		if textWidth > 0 && wl > 0 && wg > 0 && wl+wg != textWidth {
			problems = append(problems, fmt.Errorf("text_encoder and text_encoder_2 are %d+%d wide, but the unet takes encoder_hidden_states %d wide", wl, wg, textWidth))
		}
		if pg := embeds(G); pg > 0 && pooled > 0 && pg != pooled {
			problems = append(problems, fmt.Errorf("text_encoder_2's text_embeds are %d wide, but the unet takes text_embeds %d wide", pg, pooled))
		}
		if n := den.dim(io.timeIDs, 1); n > 0 && n != 6 {
			problems = append(problems, fmt.Errorf("unet: time_ids are %d wide, want 6", n))
		}
	case kindSD15:
		if textWidth > 0 && wl > 0 && wl != textWidth {
			problems = append(problems, fmt.Errorf("text_encoder is %d wide, but the unet takes encoder_hidden_states %d wide", wl, textWidth))
		}
	}

	// Exports with a fixed sequence length dictate it; diffusers' defaults otherwise.
	b.shapes.clipLen, b.shapes.t5Len = clipTokens, t5Tokens
	if n := L.dim("input_ids", 1); n > 0 {
		b.shapes.clipLen = n
	}
	if G != nil {
		if n := G.dim("input_ids", 1); n > 0 && n != b.shapes.clipLen {
			problems = append(problems, fmt.Errorf("text_encoder takes %d tokens, text_encoder_2 %d", b.shapes.clipLen, n))
		}
	}
	if T5 != nil {
		if n := T5.dim("input_ids", 1); n > 0 {
			b.shapes.t5Len = n
		}
	}
	return errors.Join(problems...)
}
