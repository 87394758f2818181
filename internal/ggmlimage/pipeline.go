package ggmlimage

import (
	"context"
	"image"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
)

// encodePrompt encodes one prompt as diffusers' StableDiffusion3Pipeline
// does: both CLIPs' penultimate states side by side, zero-padded to the
// transformer's text width, then T5's states (zeros without T5); pooled is
// both CLIPs' projections.
func (b *Backend) encodePrompt(text string) (embedding, error) {
	l, pl, err := b.textL.Encode(toInt32(b.clipL.Encode(text, clipTokens)), 1, clipTokens)
	if err != nil {
		return embedding{}, err
	}
	g, pg, err := b.textG.Encode(toInt32(b.clipG.Encode(text, clipTokens)), 1, clipTokens)
	if err != nil {
		return embedding{}, err
	}
	width := b.mmdit.Config().JointDim
	wl, wg := b.textL.Config().Width, b.textG.Config().Width
	e := embedding{seqLen: clipTokens + t5Tokens, pooled: append(pl, pg...)}
	e.seq = make([]float32, e.seqLen*width)
	for row := range clipTokens {
		dst := e.seq[row*width:]
		copy(dst, l[row*wl:(row+1)*wl])
		copy(dst[wl:], g[row*wg:(row+1)*wg])
	}
	if b.t5 != nil {
		t5, err := b.t5.Encode(toInt32(b.t5tok.Encode(text, t5Tokens)), 1, t5Tokens)
		if err != nil {
			return embedding{}, err
		}
		copy(e.seq[clipTokens*width:], t5)
	}
	return e, nil
}

func toInt32(ids []int64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// Generate runs the pipeline for job.Text, with the job's image parameters
// where it sets them, and returns a PNG.
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
	// The job counts for the step batcher from here, so that jobs that
	// arrive together step together from their first step; it stops
	// counting before the VAE.
	b.steps.enter()
	left := false
	leave := func() {
		if !left {
			left = true
			b.steps.leave()
		}
	}
	defer leave()
	positive, err := b.encodePrompt(text)
	if err != nil {
		return nil, err
	}
	negative := b.negative
	if p.Negative != "" {
		if negative, err = b.encodePrompt(p.Negative); err != nil {
			return nil, err
		}
	}
	if progress != nil {
		progress(genq.Progress{Total: p.Steps})
	}
	endDenoise := diffusion.StartDenoise(ctx, p)
	latents, err := b.denoise(ctx, positive, negative, p, progress, previews)
	endDenoise(err)
	leave()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.decode(latents, p)
}

// decode runs the VAE on latents.
func (b *Backend) decode(latents []float32, p diffusion.Params) (*image.NRGBA, error) {
	vae := b.vae.Config()
	h, w := p.Height/vae.Upscale(), p.Width/vae.Upscale()
	pixels, err := b.vae.Decode(diffusion.Unscale(latents, vae.Scaling, vae.Shift), 1, h, w)
	if err != nil {
		return nil, err
	}
	return diffusion.Pixels(pixels, []int64{1, 3, int64(p.Height), int64(p.Width)})
}

// denoise runs the shared denoising loop on the transformer through the
// step batcher, which runs each batch-2 step in one transformer call with
// the steps of the other jobs denoising at the same time.
func (b *Backend) denoise(ctx context.Context, positive, negative embedding, p diffusion.Params, progress func(genq.Progress), previews *diffusion.Previewer) ([]float32, error) {
	m := b.mmdit.Config()
	up := b.vae.Config().Upscale()
	h, w := p.Height/up, p.Width/up
	in := TransformerInput{N: 2, H: h, W: w, SeqLen: positive.seqLen,
		Text:      append(append([]float32(nil), negative.seq...), positive.seq...),
		Pooled:    append(append([]float32(nil), negative.pooled...), positive.pooled...),
		Timesteps: make([]float32, 2),
	}
	loop := diffusion.Loop{
		Schedule: diffusion.FlowSchedule(b.flow, p.Steps),
		Guidance: p.Guidance,
		Predict: func(ctx context.Context, latents []float32, t float32) ([]float32, error) {
			in.Latents = latents
			in.Timesteps[0], in.Timesteps[1] = t, t
			return b.steps.predict(ctx, in)
		},
		// A preview runs the VAE outside the step batcher's count, so that
		// the other jobs' steps do not wait for it.
		Preview: func(done int, latents []float32) error {
			return previews.After(done, func() (*image.NRGBA, error) {
				b.steps.leave()
				defer b.steps.enter()
				return b.decode(latents, p)
			})
		},
		OnStep:   b.onStep,
		Progress: progress,
	}
	return diffusion.Denoise(ctx, loop, p.Seed, m.InChannels*h*w)
}
