package onnx

import (
	"context"
	"fmt"
	"image"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
)

// embedding is one prompt encoded for the denoiser.
type embedding struct {
	seq    []float32 // [seqLen, width]
	seqLen int64
	width  int64
	pooled []float32 // nil for SD 1.5
}

// output is one model output read back as floats.
type output struct {
	data  []float32
	shape ort.Shape
}

// run runs one session into outputs of the given shapes. The outputs are
// allocated here rather than by ONNX Runtime because onnxruntime_go v1.27
// copies only half the bytes of an fp16 output it allocates itself. A nil
// ro means no cancellation (start-up work).
func (s *session) run(ro *ort.RunOptions, inputs []ort.Value, shapes []ort.Shape) ([]ort.Value, error) {
	outputs := make([]ort.Value, len(s.outNames))
	for i, name := range s.outNames {
		out, err := newEmptyTensor(s.outputs[name].DataType, shapes[i])
		if err != nil {
			destroyAll(outputs)
			return nil, fmt.Errorf("%s: output %s: %w", s.part, name, err)
		}
		outputs[i] = out
	}
	if err := s.s.RunWithOptions(inputs, outputs, ro); err != nil {
		destroyAll(outputs)
		return nil, fmt.Errorf("%s: %w", s.part, err)
	}
	return outputs, nil
}

// outputShape is output i's declared shape with its free dimensions filled
// from known, where known has a positive value for that axis. A fixed
// declared dimension wins: ORT checks it anyway.
func (s *session) outputShape(i int, known ...int64) (ort.Shape, error) {
	name := s.outNames[i]
	decl := s.outputs[name].Dimensions
	shape := make(ort.Shape, len(decl))
	for axis, d := range decl {
		switch {
		case d > 0:
			shape[axis] = d
		case axis == len(decl)-1 && s.widths[name] > 0:
			shape[axis] = s.widths[name]
		case axis < len(known) && known[axis] > 0:
			shape[axis] = known[axis]
		default:
			return nil, fmt.Errorf("%s: output %s has a free dimension %d (shape %v); genq needs the widths fixed in the graph", s.part, name, axis, decl)
		}
	}
	return shape, nil
}

// encodeText runs one text encoder on token ids and returns its outputs by
// name.
func (s *session) encodeText(ro *ort.RunOptions, ids []int64) (map[string]output, error) {
	n := int64(len(ids))
	shapes := make([]ort.Shape, len(s.outNames))
	for i := range shapes {
		var err error
		// [batch, width] (text_embeds) or [batch, sequence, width].
		if shapes[i], err = s.outputShape(i, 1, n); err != nil {
			return nil, err
		}
	}
	in, err := newIDTensor(s.inputType("input_ids"), ort.NewShape(1, n), ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.part, err)
	}
	defer in.Destroy()
	outs, err := s.run(ro, []ort.Value{in}, shapes)
	if err != nil {
		return nil, err
	}
	defer destroyAll(outs)
	byName := make(map[string]output, len(outs))
	for i, o := range outs {
		d, shape, err := floatData(o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.part, err)
		}
		byName[s.outNames[i]] = output{append([]float32(nil), d...), shape}
	}
	return byName, nil
}

// encodePrompt encodes one prompt the way the pipeline's diffusers
// encode_prompt does.
func (b *Backend) encodePrompt(ctx context.Context, ro *ort.RunOptions, text string) (embedding, error) {
	l, err := b.textL.encodeText(ro, b.clipL.Encode(text, int(b.shapes.clipLen)))
	if err != nil {
		return embedding{}, err
	}
	hl := l[b.shapes.clipLOut]
	if b.kind == kindSD15 {
		// SD 1.5 conditions on CLIP-L's last hidden state alone.
		return embedding{seq: hl.data, seqLen: hl.shape[1], width: hl.shape[2]}, nil
	}
	if err := ctx.Err(); err != nil {
		return embedding{}, err
	}
	g, err := b.textG.encodeText(ro, b.clipG.Encode(text, int(b.shapes.clipLen)))
	if err != nil {
		return embedding{}, err
	}
	hg := g[b.shapes.clipGOut]
	clipLen, wl, wg := hl.shape[1], hl.shape[2], hg.shape[2]
	if hg.shape[1] != clipLen {
		return embedding{}, fmt.Errorf("clip encoders gave %d and %d positions", clipLen, hg.shape[1])
	}

	// Both CLIPs' penultimate hidden states side by side.
	e := embedding{seqLen: clipLen, width: wl + wg}
	var t5 output
	if b.kind == kindSD3 {
		// SD3: zero-padded to T5's width, then T5's sequence after them;
		// pooled is both CLIPs' text_embeds.
		if err := ctx.Err(); err != nil {
			return embedding{}, err
		}
		t5out, err := b.textT5.encodeText(ro, b.t5.Encode(text, int(b.shapes.t5Len)))
		if err != nil {
			return embedding{}, err
		}
		t5 = t5out["last_hidden_state"]
		if t5.shape[2] < wl+wg {
			return embedding{}, fmt.Errorf("clip hidden states %d+%d wide do not fit in t5's %d", wl, wg, t5.shape[2])
		}
		e.width, e.seqLen = t5.shape[2], clipLen+t5.shape[1]
		e.pooled = append(append([]float32(nil), l["text_embeds"].data...), g["text_embeds"].data...)
	} else {
		// SDXL: pooled is CLIP-G's text_embeds alone.
		e.pooled = g["text_embeds"].data
	}
	e.seq = make([]float32, e.seqLen*e.width)
	for row := range clipLen {
		dst := e.seq[row*e.width:]
		copy(dst, hl.data[row*wl:(row+1)*wl])
		copy(dst[wl:], hg.data[row*wg:(row+1)*wg])
	}
	copy(e.seq[clipLen*e.width:], t5.data)
	return e, nil
}

// Generate runs the pipeline for job.Text, with the job's image parameters
// (size, steps, guidance, seed, negative prompt) where it sets them, and
// returns a PNG.
func (b *Backend) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	return b.GenerateImageStream(ctx, job, progress, nil)
}

// GenerateImageStream is Generate, handing emit the job's previews: the
// latents after their steps through the VAE (genq.ImageStreamer).
func (b *Backend) GenerateImageStream(ctx context.Context, job genq.Job, progress func(genq.Progress), emit func(genq.ImagePiece)) (genq.Result, error) {
	return diffusion.Generate(ctx, job, b.cfg.Pipeline, b.log.With("engine", Engine), emit,
		func(ctx context.Context, text string, p diffusion.Params, partial func(int, *image.NRGBA)) (*image.NRGBA, error) {
			return b.generate(ctx, text, p, progress, diffusion.NewPreviewer(p, partial))
		})
}

func (b *Backend) generate(ctx context.Context, text string, p diffusion.Params, progress func(genq.Progress), previews *diffusion.Previewer) (*image.NRGBA, error) {
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx run options: %w", err)
	}
	// A cancelled job stops even inside a long Run: ONNX Runtime checks the
	// terminate flag between kernels.
	terminated := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(terminated)
		ro.Terminate()
	})
	defer func() {
		if !stop() {
			<-terminated
		}
		ro.Destroy()
	}()

	positive, err := b.encodePrompt(ctx, ro, text)
	if err != nil {
		return nil, err
	}
	negative := b.negative
	if p.Negative != "" {
		if negative, err = b.encodePrompt(ctx, ro, p.Negative); err != nil {
			return nil, err
		}
	}
	if progress != nil {
		progress(genq.Progress{Total: p.Steps})
	}
	endDenoise := diffusion.StartDenoise(ctx, p)
	latents, err := b.denoise(ctx, ro, positive, negative, p, progress, previews)
	endDenoise(err)
	if err != nil {
		return nil, err
	}
	return b.decode(ro, latents, p)
}

// schedule is the noise schedule of the model's denoiser.
func (b *Backend) schedule(steps int) diffusion.Schedule {
	if b.kind.isUNet() {
		return diffusion.EulerSchedule(b.euler, steps)
	}
	return diffusion.FlowSchedule(b.flow, steps)
}

// denoise runs the shared denoising loop on the model's denoiser, its
// conditioning built once for every step.
func (b *Backend) denoise(ctx context.Context, ro *ort.RunOptions, positive, neg embedding, p diffusion.Params, progress func(genq.Progress), previews *diffusion.Previewer) ([]float32, error) {
	if neg.seqLen != positive.seqLen || neg.width != positive.width || len(neg.pooled) != len(positive.pooled) {
		return nil, fmt.Errorf("prompt embeddings differ in shape from the negative prompt's")
	}
	den, io := b.denoiser, b.kind.io
	c, h, w := b.shapes.latentChannels, int64(p.Height/8), int64(p.Width/8)

	// The conditioning is the same at every step: build it once.
	fixed := map[string]ort.Value{}
	defer func() {
		for _, v := range fixed {
			v.Destroy()
		}
	}()
	addFixed := func(name string, shape ort.Shape, data []float32) error {
		v, err := newFloatTensor(den.inputType(name), shape, data)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", den.part, name, err)
		}
		fixed[name] = v
		return nil
	}
	if err := addFixed(io.text, ort.NewShape(2, neg.seqLen, neg.width), append(append([]float32(nil), neg.seq...), positive.seq...)); err != nil {
		return nil, err
	}
	if io.pooled != "" {
		if err := addFixed(io.pooled, ort.NewShape(2, int64(len(neg.pooled))), append(append([]float32(nil), neg.pooled...), positive.pooled...)); err != nil {
			return nil, err
		}
	}
	if io.timeIDs != "" {
		// SDXL's size conditioning: original size, crop origin, target size.
		hh, ww := float32(p.Height), float32(p.Width)
		ids := []float32{hh, ww, 0, 0, hh, ww}
		if err := addFixed(io.timeIDs, ort.NewShape(2, 6), append(append([]float32(nil), ids...), ids...)); err != nil {
			return nil, err
		}
	}

	latentShape := ort.NewShape(2, c, h, w)
	outShape, err := den.outputShape(0, latentShape...)
	if err != nil {
		return nil, err
	}
	loop := diffusion.Loop{
		Schedule: b.schedule(p.Steps),
		Guidance: p.Guidance,
		Predict: func(_ context.Context, latents []float32, t float32) ([]float32, error) {
			return b.runDenoiser(ro, fixed, latents, latentShape, t, outShape)
		},
		Preview: func(done int, latents []float32) error {
			return previews.After(done, func() (*image.NRGBA, error) { return b.decode(ro, latents, p) })
		},
		OnStep:   b.onStep,
		Progress: progress,
	}
	return diffusion.Denoise(ctx, loop, p.Seed, int(c*h*w))
}

func (b *Backend) runDenoiser(ro *ort.RunOptions, fixed map[string]ort.Value, latents []float32, shape ort.Shape, t float32, outShape ort.Shape) ([]float32, error) {
	den, io := b.denoiser, b.kind.io
	x, err := newFloatTensor(den.inputType(io.latent), shape, latents)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", den.part, err)
	}
	defer x.Destroy()
	ts, err := den.timestepTensor(io.timestep, t, shape[0])
	if err != nil {
		return nil, err
	}
	defer ts.Destroy()
	inputs := make([]ort.Value, len(den.inNames))
	for i, name := range den.inNames {
		switch name {
		case io.latent:
			inputs[i] = x
		case io.timestep:
			inputs[i] = ts
		default:
			inputs[i] = fixed[name]
		}
	}
	outs, err := den.run(ro, inputs, []ort.Shape{outShape})
	if err != nil {
		return nil, err
	}
	defer destroyAll(outs)
	data, _, err := floatData(outs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", den.part, err)
	}
	return data, nil
}

// timestepTensor makes the timestep input as the model declares it: a
// scalar (UNet exports) or one value per batch item (SD3).
func (s *session) timestepTensor(name string, t float32, batch int64) (ort.Value, error) {
	info := s.inputs[name]
	if len(info.Dimensions) == 0 {
		v, err := newScalar(info.DataType, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.part, name, err)
		}
		return v, nil
	}
	n := batch
	if d := info.Dimensions[0]; d > 0 {
		n = d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = t
	}
	v, err := newFloatTensor(info.DataType, ort.NewShape(n), vals)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.part, name, err)
	}
	return v, nil
}

// decode turns latents into a PNG through the VAE decoder.
func (b *Backend) decode(ro *ort.RunOptions, latents []float32, p diffusion.Params) (*image.NRGBA, error) {
	vae := b.vaeDecoder
	shape := ort.NewShape(1, b.shapes.latentChannels, int64(p.Height/8), int64(p.Width/8))
	in, err := newFloatTensor(vae.inputType("latent_sample"), shape, diffusion.Unscale(latents, b.vae.Scaling, b.vae.Shift))
	if err != nil {
		return nil, fmt.Errorf("vae_decoder: %w", err)
	}
	defer in.Destroy()
	outShape, err := vae.outputShape(0, 1, 3, int64(p.Height), int64(p.Width))
	if err != nil {
		return nil, err
	}
	outs, err := vae.run(ro, []ort.Value{in}, []ort.Shape{outShape})
	if err != nil {
		return nil, err
	}
	defer destroyAll(outs)
	sample, _, err := floatData(outs[0])
	if err != nil {
		return nil, fmt.Errorf("vae_decoder: %w", err)
	}
	return diffusion.Pixels(sample, outShape)
}
