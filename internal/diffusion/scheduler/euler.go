package scheduler

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// EulerDiscrete is diffusers' EulerDiscreteScheduler for UNet models
// (SD 1.5, SDXL): noise levels from the training betas, Euler steps on the
// denoised estimate. Exports configured with another scheduler of the same
// beta schedule (PNDM, DDIM, LMS, DPM-Solver) run with this one.
type EulerDiscrete struct {
	BetaStart         float64 `json:"beta_start"`
	BetaEnd           float64 `json:"beta_end"`
	BetaSchedule      string  `json:"beta_schedule"`
	NumTrainTimesteps int     `json:"num_train_timesteps"`
	StepsOffset       int     `json:"steps_offset"`
	TimestepSpacing   string  `json:"timestep_spacing"`
	PredictionType    string  `json:"prediction_type"`
}

// SameBetaSchedulers are the scheduler classes whose config EulerDiscrete
// can stand in for.
var SameBetaSchedulers = []string{
	"EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler", "PNDMScheduler", "DDIMScheduler",
	"LMSDiscreteScheduler", "DPMSolverMultistepScheduler", "DDPMScheduler", "HeunDiscreteScheduler",
}

// LoadEuler reads scheduler_config.json of a UNet export.
func LoadEuler(path string) (EulerDiscrete, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return EulerDiscrete{}, "", fmt.Errorf("scheduler config: %w", err)
	}
	var cfg struct {
		EulerDiscrete
		Class string `json:"_class_name"`
	}
	// EulerDiscreteScheduler's defaults for the fields a config may omit, as
	// diffusers' from_config fills them (SD 1.5's PNDM config has no
	// timestep_spacing, so it gets linspace).
	cfg.EulerDiscrete = EulerDiscrete{BetaStart: 0.0001, BetaEnd: 0.02, BetaSchedule: "linear", NumTrainTimesteps: 1000, TimestepSpacing: "linspace", PredictionType: "epsilon"}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return EulerDiscrete{}, "", fmt.Errorf("scheduler config %s: %w", path, err)
	}
	e := cfg.EulerDiscrete
	switch {
	case !slices.Contains(SameBetaSchedulers, cfg.Class):
		return e, "", fmt.Errorf("scheduler config %s: scheduler %q is not supported for UNet models", path, cfg.Class)
	case e.BetaSchedule != "linear" && e.BetaSchedule != "scaled_linear":
		return e, "", fmt.Errorf("scheduler config %s: beta_schedule %q is not supported, want linear or scaled_linear", path, e.BetaSchedule)
	case e.TimestepSpacing != "leading" && e.TimestepSpacing != "trailing" && e.TimestepSpacing != "linspace":
		return e, "", fmt.Errorf("scheduler config %s: timestep_spacing %q is not supported", path, e.TimestepSpacing)
	case e.PredictionType != "epsilon" && e.PredictionType != "v_prediction":
		return e, "", fmt.Errorf("scheduler config %s: prediction_type %q is not supported", path, e.PredictionType)
	case e.NumTrainTimesteps < 2 || e.BetaStart <= 0 || e.BetaEnd <= e.BetaStart:
		return e, "", fmt.Errorf("scheduler config %s: bad betas or num_train_timesteps", path)
	}
	return e, cfg.Class, nil
}

// trainSigmas are the noise levels of the training timesteps:
// sqrt((1 − ᾱ)/ᾱ) with ᾱ the cumulative product of 1 − β.
func (e EulerDiscrete) trainSigmas() []float64 {
	n := e.NumTrainTimesteps
	sigmas := make([]float64, n)
	cum := 1.0
	for i := range n {
		var beta float64
		frac := float64(i) / float64(n-1)
		if e.BetaSchedule == "scaled_linear" {
			s := math.Sqrt(e.BetaStart) + (math.Sqrt(e.BetaEnd)-math.Sqrt(e.BetaStart))*frac
			beta = s * s
		} else {
			beta = e.BetaStart + (e.BetaEnd-e.BetaStart)*frac
		}
		cum *= 1 - beta
		sigmas[i] = math.Sqrt((1 - cum) / cum)
	}
	return sigmas
}

// Timesteps returns the model's timestep input at each step, highest
// first, spaced as timestep_spacing says.
func (e EulerDiscrete) Timesteps(steps int) []float64 {
	n := e.NumTrainTimesteps
	ts := make([]float64, steps)
	for i := range steps {
		switch e.TimestepSpacing {
		case "linspace":
			if steps > 1 {
				ts[i] = float64(n-1) * float64(steps-1-i) / float64(steps-1)
			}
		case "trailing":
			ts[i] = math.RoundToEven(float64(n)-float64(i)*float64(n)/float64(steps)) - 1
		default: // leading
			ts[i] = float64((steps-1-i)*(n/steps) + e.StepsOffset)
		}
	}
	return ts
}

// Sigmas returns the noise level at each timestep (interpolated between
// training timesteps), then 0.
func (e EulerDiscrete) Sigmas(timesteps []float64) []float64 {
	train := e.trainSigmas()
	out := make([]float64, len(timesteps)+1)
	for i, t := range timesteps {
		t = max(0, min(float64(len(train)-1), t))
		lo := int(math.Floor(t))
		hi := min(lo+1, len(train)-1)
		out[i] = train[lo] + (train[hi]-train[lo])*(t-float64(lo))
	}
	return out
}

// InitNoiseSigma is how much the unit noise is scaled to start from.
func (e EulerDiscrete) InitNoiseSigma(sigmas []float64) float64 {
	top := slices.Max(sigmas)
	if e.TimestepSpacing == "leading" {
		return math.Sqrt(top*top + 1)
	}
	return top
}

// InputScale is the factor on the latents fed to the UNet at sigma.
func InputScale(sigma float64) float64 { return 1 / math.Sqrt(sigma*sigma+1) }

// Derivative turns the model's prediction (after guidance) into dx/dσ in
// place: for ε-prediction that is ε itself; for v-prediction it goes
// through the denoised estimate.
func (e EulerDiscrete) Derivative(x, pred []float32, sigma float64) {
	if e.PredictionType != "v_prediction" {
		return
	}
	c := sigma*sigma + 1
	for i := range pred {
		x0 := float64(pred[i])*(-sigma/math.Sqrt(c)) + float64(x[i])/c
		pred[i] = float32((float64(x[i]) - x0) / sigma)
	}
}
