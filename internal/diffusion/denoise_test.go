package diffusion

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/genq/genq/internal/diffusion/scheduler"
	"github.com/genq/genq/internal/genq"
)

// The loop both engines share: what the denoiser is fed at each step (the
// latents twice, scaled for a UNet), the guided Euler step applied to what
// it returns, and the calls around the steps.
func TestDenoise(t *testing.T) {
	const per, steps = 6, 4
	sd15 := scheduler.EulerDiscrete{BetaStart: 0.00085, BetaEnd: 0.012, BetaSchedule: "scaled_linear",
		NumTrainTimesteps: 1000, StepsOffset: 1, TimestepSpacing: "leading", PredictionType: "v_prediction"}
	for _, tc := range []struct {
		name  string
		sched Schedule
	}{
		{"flow", FlowSchedule(scheduler.FlowMatchEuler{Shift: 3, NumTrainTimesteps: 1000}, steps)},
		{"unet", EulerSchedule(sd15, steps)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sched
			// The reference: the same steps written out, with a denoiser
			// that predicts the negative half as 0.5 and the prompt's as
			// its input (so guidance and scaling both show).
			want := InitialLatents(7, per)
			for i := range want {
				want[i] *= float32(s.InitNoise)
			}
			var previews, progress []int
			step := 0
			l := Loop{
				Schedule: s,
				Guidance: 3,
				Predict: func(_ context.Context, in []float32, ts float32) ([]float32, error) {
					scale := float32(1)
					if s.Derivative != nil {
						scale = float32(scheduler.InputScale(s.Sigmas[step]))
					}
					if ts != float32(s.Timesteps[step]) {
						t.Errorf("step %d: timestep %v, want %v", step, ts, float32(s.Timesteps[step]))
					}
					out := make([]float32, len(in))
					for i := range per {
						if in[i] != want[i]*scale || in[per+i] != want[i]*scale {
							t.Fatalf("step %d: input %d is %v and %v, want %v twice", step, i, in[i], in[per+i], want[i]*scale)
						}
						out[i], out[per+i] = 0.5, in[per+i]
					}
					pred := make([]float32, per)
					Guidance(pred, out[:per], out[per:], 3)
					if s.Derivative != nil {
						sd15.Derivative(want, pred, s.Sigmas[step])
					}
					scheduler.Step(want, pred, s.Sigmas[step], s.Sigmas[step+1])
					step++
					return out, nil
				},
				Preview:  func(done int, _ []float32) error { previews = append(previews, done); return nil },
				Progress: func(p genq.Progress) { progress = append(progress, p.Done) },
			}
			got, err := Denoise(context.Background(), l, 7, per)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Abs(float64(got[i]-want[i])) > 1e-6 {
					t.Errorf("latent %d is %v, want %v", i, got[i], want[i])
				}
			}
			if len(previews) != steps+1 || previews[0] != 0 || previews[steps] != steps {
				t.Errorf("previews after %v, want 0 to %d", previews, steps)
			}
			if len(progress) != steps || progress[steps-1] != steps {
				t.Errorf("progress %v, want 1 to %d", progress, steps)
			}
		})
	}
}

func TestDenoiseFailures(t *testing.T) {
	sched := FlowSchedule(scheduler.FlowMatchEuler{Shift: 3, NumTrainTimesteps: 1000}, 3)
	short := func(context.Context, []float32, float32) ([]float32, error) { return make([]float32, 3), nil }
	if _, err := Denoise(context.Background(), Loop{Schedule: sched, Predict: short}, 1, 4); err == nil {
		t.Error("a denoiser's output of the wrong size was taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	cancelling := func(_ context.Context, in []float32) ([]float32, error) {
		calls++
		cancel()
		return make([]float32, len(in)), nil
	}
	_, err := Denoise(ctx, Loop{Schedule: sched, Predict: func(ctx context.Context, in []float32, _ float32) ([]float32, error) {
		return cancelling(ctx, in)
	}}, 1, 4)
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("after a cancel: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
}
