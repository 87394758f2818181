package onnx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/diffusion/scheduler"
)

// refFlowMatch transcribes diffusers' FlowMatchEulerDiscreteScheduler in
// float64 along its own path, which is not genq's: the training sigmas from
// the training timesteps (1000 … 1) shifted, then set_timesteps' linspace in
// timestep space between σ_max·N and σ_min·N, divided by N, shifted again,
// timesteps = σ·N, and a final 0.
func refFlowMatch(shift float64, trainSteps, steps int) (sigmas, timesteps []float64) {
	n := float64(trainSteps)
	shifted := func(s float64) float64 { return shift * s / (1 + (shift-1)*s) }
	train := make([]float64, trainSteps) // np.linspace(1, N, N)[::-1] / N, shifted
	for i := range train {
		train[i] = shifted((n - float64(i)) / n)
	}
	tMax, tMin := train[0]*n, train[trainSteps-1]*n
	for i := range steps {
		t := tMax + (tMin-tMax)*float64(i)/float64(steps-1) // np.linspace
		s := shifted(t / n)
		sigmas = append(sigmas, s)
		timesteps = append(timesteps, s*n)
	}
	return append(sigmas, 0), timesteps
}

// TestScheduleMatchesDiffusers checks SD3's schedule as the pipeline feeds
// it (shift 3, 28 steps): σ and the transformer's timestep at every step.
func TestScheduleMatchesDiffusers(t *testing.T) {
	for _, tt := range []struct {
		shift float64
		steps int
	}{{3, 28}, {3, 4}, {1, 28}, {6, 50}} {
		b := &Backend{cfg: Config{Pipeline: diffusion.Pipeline{Steps: tt.steps}}, kind: kindSD3, flow: scheduler.FlowMatchEuler{Shift: tt.shift, NumTrainTimesteps: 1000}}
		got := b.schedule(b.cfg.Steps)
		wantSigmas, wantTimesteps := refFlowMatch(tt.shift, 1000, tt.steps)
		if len(got.Sigmas) != len(wantSigmas) || len(got.Timesteps) != len(wantTimesteps) {
			t.Fatalf("shift %v, %d steps: %d sigmas and %d timesteps, want %d and %d", tt.shift, tt.steps, len(got.Sigmas), len(got.Timesteps), len(wantSigmas), len(wantTimesteps))
		}
		for i := range wantSigmas {
			if d := math.Abs(got.Sigmas[i] - wantSigmas[i]); d > 1e-6 {
				t.Errorf("shift %v, %d steps: σ[%d] = %.12g, want %.12g", tt.shift, tt.steps, i, got.Sigmas[i], wantSigmas[i])
			}
		}
		for i := range wantTimesteps {
			// The transformer gets the timestep as a float32 (fp16 in an fp16
			// export, which ORT's fp16 input then rounds as torch does).
			fed := float64(float32(got.Timesteps[i]))
			if d := math.Abs(fed - wantTimesteps[i]); d > 1e-6*wantTimesteps[i] {
				t.Errorf("shift %v, %d steps: timestep[%d] fed %.12g, want %.12g", tt.shift, tt.steps, i, fed, wantTimesteps[i])
			}
		}
		if got.InitNoise != 1 {
			t.Errorf("initial noise scale %v, want 1 (flow matching starts from pure noise)", got.InitNoise)
		}
	}
}

// TestStepAndGuidanceMatchFormulas runs the 28 SD3 steps on random
// predictions: at each step genq's guidance and Euler update (float32) are
// compared with the formulas in float64 from the same inputs,
// v = u + 7(c − u) and x + (σₙₑₓₜ − σ)·v, then with the VAE's input
// x/1.5305 + 0.0609.
func TestStepAndGuidanceMatchFormulas(t *testing.T) {
	const n, scale = 4096, 7.0
	rng := rand.New(rand.NewPCG(1, 2))
	sigmas, _ := refFlowMatch(3, 1000, 28)
	x := diffusion.InitialLatents(42, n)
	u, c, v := make([]float32, n), make([]float32, n), make([]float32, n)
	worst := 0.0
	check := func(what string, step int, got float32, want float64) {
		d := math.Abs(float64(got)-want) / max(1, math.Abs(want))
		worst = max(worst, d)
		if d > 1e-6 {
			t.Errorf("step %d: %s = %.9g, want %.9g", step, what, got, want)
		}
	}
	for step := range 28 {
		for i := range n {
			u[i], c[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		before := append([]float32(nil), x...)
		diffusion.Guidance(v, u, c, scale)
		scheduler.Step(x, v, sigmas[step], sigmas[step+1])
		for i := range n {
			u64, c64 := float64(u[i]), float64(c[i])
			v64 := u64 + scale*(c64-u64)
			check("guided velocity", step, v[i], v64)
			check("latent", step, x[i], float64(before[i])+(sigmas[step+1]-sigmas[step])*v64)
		}
	}
	vae := diffusion.Unscale(x, 1.5305, 0.0609)
	for i := range n {
		check("VAE input", 28, vae[i], float64(x[i])/1.5305+0.0609)
	}
	t.Logf("largest relative difference from float64: %.3g", worst)
}
