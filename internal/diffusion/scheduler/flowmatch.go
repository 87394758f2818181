// Package scheduler is the flow-matching Euler scheduler of SD3
// (diffusers' FlowMatchEulerDiscreteScheduler, static shift only).
package scheduler

import (
	"encoding/json"
	"fmt"
	"os"
)

// FlowMatchEuler holds the settings from scheduler_config.json.
type FlowMatchEuler struct {
	Shift             float64 `json:"shift"`
	NumTrainTimesteps int     `json:"num_train_timesteps"`
}

// Load reads scheduler_config.json, refusing schedulers other than
// FlowMatchEulerDiscreteScheduler and dynamic shifting (which needs the
// image size at every step and is not what SD3-medium uses).
func Load(path string) (FlowMatchEuler, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return FlowMatchEuler{}, fmt.Errorf("scheduler config: %w", err)
	}
	var cfg struct {
		FlowMatchEuler
		Class        string `json:"_class_name"`
		DynamicShift bool   `json:"use_dynamic_shifting"`
	}
	cfg.Shift, cfg.NumTrainTimesteps = 1, 1000 // diffusers' defaults
	if err := json.Unmarshal(b, &cfg); err != nil {
		return FlowMatchEuler{}, fmt.Errorf("scheduler config %s: %w", path, err)
	}
	if cfg.Class != "FlowMatchEulerDiscreteScheduler" {
		return FlowMatchEuler{}, fmt.Errorf("scheduler config %s: scheduler %q is not supported, want FlowMatchEulerDiscreteScheduler", path, cfg.Class)
	}
	if cfg.DynamicShift {
		return FlowMatchEuler{}, fmt.Errorf("scheduler config %s: use_dynamic_shifting is not supported", path)
	}
	if cfg.Shift <= 0 || cfg.NumTrainTimesteps <= 0 {
		return FlowMatchEuler{}, fmt.Errorf("scheduler config %s: shift %v and num_train_timesteps %d must be positive", path, cfg.Shift, cfg.NumTrainTimesteps)
	}
	return cfg.FlowMatchEuler, nil
}

// shift bends a noise level towards 1: shift·s / (1 + (shift−1)·s).
func (f FlowMatchEuler) shift(s float64) float64 {
	return f.Shift * s / (1 + (f.Shift-1)*s)
}

// Sigmas returns steps+1 noise levels, from 1 down to 0. As in diffusers,
// the schedule is linear between the shifted extremes of the training
// schedule (1 and shift(1/N)) and then shifted again.
func (f FlowMatchEuler) Sigmas(steps int) []float64 {
	if steps < 1 {
		return []float64{0}
	}
	sigmaMax, sigmaMin := 1.0, f.shift(1/float64(f.NumTrainTimesteps))
	sigmas := make([]float64, steps+1)
	for i := range steps {
		lin := sigmaMax
		if steps > 1 {
			lin = sigmaMax + (sigmaMin-sigmaMax)*float64(i)/float64(steps-1)
		}
		sigmas[i] = f.shift(lin)
	}
	sigmas[steps] = 0
	return sigmas
}

// Timestep is the transformer's timestep input for a noise level.
func (f FlowMatchEuler) Timestep(sigma float64) float64 {
	return sigma * float64(f.NumTrainTimesteps)
}

// Step moves latents x along velocity v from noise level sigma to next:
// x += (next − sigma)·v.
func Step(x, v []float32, sigma, next float64) {
	dt := float32(next - sigma)
	for i := range x {
		x[i] += dt * v[i]
	}
}
