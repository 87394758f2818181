package diffusion

import (
	"context"
	"fmt"

	"github.com/genq/genq/internal/diffusion/scheduler"
	"github.com/genq/genq/internal/genq"
)

// Schedule is one image's noise levels and the denoiser's timestep input
// at each of its steps.
type Schedule struct {
	Sigmas    []float64 // steps+1, ending at 0
	Timesteps []float64 // one per step
	InitNoise float64   // scale of the starting noise
	// Derivative is set for a UNet, which is fed its latents scaled by
	// 1/√(σ²+1) and predicts noise: it turns the guided prediction into
	// the Euler step's dx/dσ in place. A flow-matching transformer is fed
	// the latents as they are and predicts the velocity itself.
	Derivative func(x, pred []float32, sigma float64)
}

// FlowSchedule is the flow-matching Euler schedule of SD3's transformer.
func FlowSchedule(f scheduler.FlowMatchEuler, steps int) Schedule {
	sigmas := f.Sigmas(steps)
	ts := make([]float64, steps)
	for i := range ts {
		ts[i] = f.Timestep(sigmas[i])
	}
	return Schedule{Sigmas: sigmas, Timesteps: ts, InitNoise: 1}
}

// EulerSchedule is the discrete Euler schedule of a UNet (SD 1.5, SDXL).
func EulerSchedule(e scheduler.EulerDiscrete, steps int) Schedule {
	ts := e.Timesteps(steps)
	sigmas := e.Sigmas(ts)
	return Schedule{Sigmas: sigmas, Timesteps: ts, InitNoise: e.InitNoiseSigma(sigmas), Derivative: e.Derivative}
}

// Loop is what the denoising loop needs from an engine. Every image
// engine runs the same loop: classifier-free guidance with both halves
// (negative prompt, prompt) in one batch-2 call of the denoiser.
type Loop struct {
	Schedule Schedule
	Guidance float64
	// Predict runs the denoiser at timestep t on in, the step's latents
	// twice over (the negative prompt's half first), and returns its
	// prediction for both halves. in is the loop's, read during the call
	// only.
	Predict func(ctx context.Context, in []float32, t float32) ([]float32, error)
	// Preview is called once done steps have run (0: before the first)
	// with the latents so far; nil: no previews.
	Preview func(done int, latents []float32) error
	// OnStep observes the latents after each step (tests); nil: none.
	OnStep   func(step int, latents []float32)
	Progress func(genq.Progress)
}

// Denoise runs l from the seed's noise over latents of per values and
// returns the final latents.
func Denoise(ctx context.Context, l Loop, seed int64, per int) ([]float32, error) {
	s := l.Schedule
	latents := InitialLatents(seed, per)
	if s.InitNoise != 1 {
		for i := range latents {
			latents[i] *= float32(s.InitNoise)
		}
	}
	preview := func(done int) error {
		if l.Preview == nil {
			return nil
		}
		return l.Preview(done, latents)
	}
	if err := preview(0); err != nil {
		return nil, err
	}
	in := make([]float32, 2*per)
	pred := make([]float32, per)
	steps := len(s.Timesteps)
	for step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sigma, next := s.Sigmas[step], s.Sigmas[step+1]
		scale := float32(1)
		if s.Derivative != nil {
			scale = float32(scheduler.InputScale(sigma))
		}
		for i, x := range latents {
			in[i], in[per+i] = x*scale, x*scale
		}
		out, err := l.Predict(ctx, in, float32(s.Timesteps[step]))
		if err != nil {
			return nil, err
		}
		if len(out) != 2*per {
			return nil, fmt.Errorf("denoiser gave %d values, want %d", len(out), 2*per)
		}
		Guidance(pred, out[:per], out[per:], l.Guidance)
		if s.Derivative != nil {
			s.Derivative(latents, pred, sigma)
		}
		scheduler.Step(latents, pred, sigma, next)
		if l.OnStep != nil {
			l.OnStep(step, latents)
		}
		if l.Progress != nil {
			l.Progress(genq.Progress{Done: step + 1, Total: steps})
		}
		if err := preview(step + 1); err != nil {
			return nil, err
		}
	}
	return latents, nil
}
