package onnx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/onnx/scheduler"
)

// embedding is one prompt encoded the SD3 way.
type embedding struct {
	seq    []float32 // [clipLen+t5Len, joint]: CLIP-L|CLIP-G|zeros, then T5
	seqLen int64
	joint  int64
	pooled []float32 // CLIP-L text_embeds | CLIP-G text_embeds
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

// encodeText runs one encoder on token ids and returns its outputs as
// floats with their shapes.
func (s *session) encodeText(ro *ort.RunOptions, ids []int64) ([][]float32, []ort.Shape, error) {
	n := int64(len(ids))
	shapes := make([]ort.Shape, len(s.outNames))
	for i := range shapes {
		var err error
		// [batch, width] (text_embeds) or [batch, sequence, width].
		if shapes[i], err = s.outputShape(i, 1, n); err != nil {
			return nil, nil, err
		}
	}
	in, err := newIDTensor(s.inputType("input_ids"), ort.NewShape(1, n), ids)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.part, err)
	}
	defer in.Destroy()
	outs, err := s.run(ro, []ort.Value{in}, shapes)
	if err != nil {
		return nil, nil, err
	}
	defer destroyAll(outs)
	data := make([][]float32, len(outs))
	for i, o := range outs {
		d, shape, err := floatData(o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.part, err)
		}
		data[i], shapes[i] = append([]float32(nil), d...), shape
	}
	return data, shapes, nil
}

// encodePrompt is SD3's encode_prompt for one prompt: CLIP-L's and CLIP-G's
// penultimate hidden states side by side, zero-padded to T5's width, then
// T5's sequence after them; pooled is both CLIPs' text_embeds.
func (b *Backend) encodePrompt(ctx context.Context, ro *ort.RunOptions, text string) (embedding, error) {
	type clipResult struct {
		hidden []float32
		width  int64
		pooled []float32
	}
	runCLIP := func(s *session, ids []int64) (clipResult, error) {
		out, shapes, err := s.encodeText(ro, ids)
		if err != nil {
			return clipResult{}, err
		}
		// Outputs come in the order the session names them: text_embeds, hidden.
		return clipResult{hidden: out[1], width: shapes[1][2], pooled: out[0]}, nil
	}
	l, err := runCLIP(b.textL, b.clipL.Encode(text, int(b.shapes.clipLen)))
	if err != nil {
		return embedding{}, err
	}
	if err := ctx.Err(); err != nil {
		return embedding{}, err
	}
	g, err := runCLIP(b.textG, b.clipG.Encode(text, int(b.shapes.clipLen)))
	if err != nil {
		return embedding{}, err
	}
	if err := ctx.Err(); err != nil {
		return embedding{}, err
	}
	t5out, t5shapes, err := b.textT5.encodeText(ro, b.t5.Encode(text, int(b.shapes.t5Len)))
	if err != nil {
		return embedding{}, err
	}
	joint := t5shapes[0][2]
	if l.width+g.width > joint {
		return embedding{}, fmt.Errorf("clip hidden states %d+%d wide do not fit in t5's %d", l.width, g.width, joint)
	}
	clipLen, t5Len := b.shapes.clipLen, t5shapes[0][1]
	e := embedding{seqLen: clipLen + t5Len, joint: joint}
	e.seq = make([]float32, e.seqLen*joint)
	for row := range clipLen {
		dst := e.seq[row*joint:]
		copy(dst, l.hidden[row*l.width:(row+1)*l.width])
		copy(dst[l.width:], g.hidden[row*g.width:(row+1)*g.width])
	}
	copy(e.seq[clipLen*joint:], t5out[0])
	e.pooled = append(append([]float32(nil), l.pooled...), g.pooled...)
	return e, nil
}

// Generate runs the SD3 pipeline for job.Text and returns a PNG.
func (b *Backend) Generate(ctx context.Context, job genq.Job, progress func()) (genq.Result, error) {
	if job.Text == "" {
		return genq.Result{}, genq.Errorf(genq.Invalid, "text field is required")
	}
	seed := b.cfg.Seed
	if seed == 0 {
		seed = rand.Int64N(1<<62) + 1
	}
	start := time.Now()
	png, err := b.generate(ctx, job.Text, seed, progress)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return genq.Result{}, err
	}
	b.log.Debug("image generated", "job", job.ID, "seed", seed, "bytes", len(png), "took", time.Since(start).Round(time.Millisecond))
	return genq.NewImageResult(png), nil
}

func (b *Backend) generate(ctx context.Context, text string, seed int64, progress func()) ([]byte, error) {
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
	if progress != nil {
		progress()
	}
	latents, err := b.denoise(ctx, ro, positive, seed, progress)
	if err != nil {
		return nil, err
	}
	return b.decode(ro, latents)
}

// initialLatents draws the starting noise, [1, C, H/8, W/8], from seed.
func initialLatents(seed int64, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32^0x5d3))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// denoise runs the flow-matching Euler loop with classifier-free guidance,
// both halves (empty prompt, prompt) in one batch-2 transformer call.
func (b *Backend) denoise(ctx context.Context, ro *ort.RunOptions, positive embedding, seed int64, progress func()) ([]float32, error) {
	neg := b.negative
	if neg.seqLen != positive.seqLen || neg.joint != positive.joint || len(neg.pooled) != len(positive.pooled) {
		return nil, fmt.Errorf("prompt embeddings differ in shape from the negative prompt's")
	}
	tr := b.transformer
	c, h, w := b.shapes.latentChannels, int64(b.cfg.Height/8), int64(b.cfg.Width/8)
	per := int(c * h * w)
	latents := initialLatents(seed, per)

	// The text inputs are the same at every step: build them once.
	enc, err := newFloatTensor(tr.inputType("encoder_hidden_states"), ort.NewShape(2, neg.seqLen, neg.joint), append(append([]float32(nil), neg.seq...), positive.seq...))
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	defer enc.Destroy()
	pooled, err := newFloatTensor(tr.inputType("pooled_projections"), ort.NewShape(2, int64(len(neg.pooled))), append(append([]float32(nil), neg.pooled...), positive.pooled...))
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	defer pooled.Destroy()

	batch := make([]float32, 2*per)
	velocity := make([]float32, per)
	sigmas := b.sched.Sigmas(b.cfg.Steps)
	for step := range b.cfg.Steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		copy(batch, latents)
		copy(batch[per:], latents)
		t := float32(b.sched.Timestep(sigmas[step]))
		out, err := b.runTransformer(ro, batch, ort.NewShape(2, c, h, w), enc, pooled, []float32{t, t})
		if err != nil {
			return nil, err
		}
		if len(out) != 2*per {
			return nil, fmt.Errorf("transformer: %d output values, want %d", len(out), 2*per)
		}
		applyGuidance(velocity, out[:per], out[per:], b.cfg.GuidanceScale)
		scheduler.Step(latents, velocity, sigmas[step], sigmas[step+1])
		if progress != nil {
			progress()
		}
	}
	return latents, nil
}

func (b *Backend) runTransformer(ro *ort.RunOptions, latents []float32, shape ort.Shape, enc, pooled ort.Value, timesteps []float32) ([]float32, error) {
	tr := b.transformer
	hs, err := newFloatTensor(tr.inputType("hidden_states"), shape, latents)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	defer hs.Destroy()
	ts, err := newFloatTensor(tr.inputType("timestep"), ort.NewShape(int64(len(timesteps))), timesteps)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	defer ts.Destroy()
	byName := map[string]ort.Value{"hidden_states": hs, "encoder_hidden_states": enc, "pooled_projections": pooled, "timestep": ts}
	inputs := make([]ort.Value, len(tr.inNames))
	for i, name := range tr.inNames {
		inputs[i] = byName[name]
	}
	outShape, err := tr.outputShape(0, shape...)
	if err != nil {
		return nil, err
	}
	outs, err := tr.run(ro, inputs, []ort.Shape{outShape})
	if err != nil {
		return nil, err
	}
	defer destroyAll(outs)
	data, _, err := floatData(outs[0])
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	return data, nil
}

// decode turns latents into a PNG through the VAE decoder.
func (b *Backend) decode(ro *ort.RunOptions, latents []float32) ([]byte, error) {
	vae := b.vaeDecoder
	shape := ort.NewShape(1, b.shapes.latentChannels, int64(b.cfg.Height/8), int64(b.cfg.Width/8))
	in, err := newFloatTensor(vae.inputType("latent_sample"), shape, unscaleLatents(latents, b.vae.Scaling, b.vae.Shift))
	if err != nil {
		return nil, fmt.Errorf("vae_decoder: %w", err)
	}
	defer in.Destroy()
	outShape, err := vae.outputShape(0, 1, 3, int64(b.cfg.Height), int64(b.cfg.Width))
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
	return encodePNG(sample, outShape)
}
