package diffusion

import (
	"math/rand/v2"

	"github.com/genq/genq/internal/genq"
)

// Settings are a backend's image defaults and limits.
type Settings struct {
	Width, Height, Steps int
	Guidance             float64
	Seed                 int64 // 0: a random seed per job
	MaxSize, MaxSteps    int
}

// Params are one image's settings: the job's where it gives them, else the
// backend's.
type Params struct {
	Width, Height, Steps int
	Guidance             float64
	Seed                 int64
	Negative             string
}

// Resolve resolves the job's image parameters against s and checks them
// against its limits: the worker's own check, whatever the producer
// checked before queuing.
func Resolve(job genq.Job, s Settings) (Params, error) {
	if err := job.ValidateInput(); err != nil {
		return Params{}, err
	}
	if len(job.Messages) > 0 || job.Prompt != "" {
		return Params{}, genq.Errorf(genq.Invalid, "an image job needs text: messages and prompt are for the text variants")
	}
	p := Params{Width: s.Width, Height: s.Height, Steps: s.Steps, Guidance: s.Guidance, Seed: s.Seed, Negative: job.NegativePrompt}
	if job.Width != 0 {
		if err := genq.ValidateImageSize(job.Width, job.Height, s.MaxSize); err != nil {
			return Params{}, err
		}
		p.Width, p.Height = job.Width, job.Height
	}
	if job.Steps != 0 {
		if job.Steps > s.MaxSteps {
			return Params{}, genq.Errorf(genq.Invalid, "num_inference_steps must be between 1 and %d, not %d", s.MaxSteps, job.Steps)
		}
		p.Steps = job.Steps
	}
	if job.GuidanceScale != nil {
		p.Guidance = *job.GuidanceScale
	}
	if job.Seed != nil {
		p.Seed = *job.Seed
	}
	if p.Seed == 0 {
		p.Seed = rand.Int64N(1<<62) + 1
	}
	return p, nil
}
