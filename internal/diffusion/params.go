package diffusion

import (
	"encoding/json"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/genq/genq/internal/genq"
)

// Params are one image's settings: the job's where it gives them, else the
// backend's.
type Params struct {
	Width, Height, Steps int
	Guidance             float64
	Seed                 int64
	Negative             string
	// Partials is how many previews the job streams (PartialSteps).
	Partials int
}

// PartialSteps is after how many of steps denoising steps each of n
// previews is taken: evenly spaced, the last before the final step (0 is
// the starting noise), so that every preview shows something the final
// image does not.
func PartialSteps(steps, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = (j + 1) * steps / (n + 1)
	}
	return out
}

// Resolve resolves the job's image parameters against s and checks them
// against its limits: the worker's own check, whatever the producer
// checked before queuing.
func Resolve(job genq.Job, s Pipeline) (Params, error) {
	if err := job.ValidateInput(); err != nil {
		return Params{}, err
	}
	if len(job.Messages) > 0 || job.Prompt != "" {
		return Params{}, genq.Errorf(genq.Invalid, "an image job needs text: messages and prompt are for the text variants")
	}
	p := Params{Width: s.Width, Height: s.Height, Steps: s.Steps, Guidance: s.GuidanceScale, Seed: s.Seed, Negative: job.NegativePrompt}
	if job.Stream {
		p.Partials = job.PartialImages
	}
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

// ModelIndex is a diffusers model directory's model_index.json: the
// pipeline's class and the model's name.
type ModelIndex struct {
	Class string `json:"_class_name"`
	Name  string `json:"_name_or_path"`
}

// ReadModelIndex reads dir's model_index.json; want says, when it is
// missing, what layout the engine expects. The name falls back to the
// directory's.
func ReadModelIndex(dir, want string) (ModelIndex, error) {
	var index ModelIndex
	raw, err := os.ReadFile(filepath.Join(dir, "model_index.json"))
	if err != nil {
		return index, fmt.Errorf("model dir %s: %w (want %s)", dir, err, want)
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return index, fmt.Errorf("model dir %s: model_index.json: %w", dir, err)
	}
	if index.Name == "" {
		index.Name = filepath.Base(filepath.Clean(dir))
	}
	return index, nil
}

// Previewer takes a job's previews along its denoising loop: the engine
// calls After after each step with a way to decode its latents, and the
// previews due then are decoded once and handed to partial.
type Previewer struct {
	at      []int
	next    int
	partial func(int, *image.NRGBA)
}

// NewPreviewer is the previewer of p's Partials previews.
func NewPreviewer(p Params, partial func(int, *image.NRGBA)) *Previewer {
	return &Previewer{at: PartialSteps(p.Steps, p.Partials), partial: partial}
}

// After is called once done steps have run (0: before the first); decode
// runs only when a preview is due.
func (v *Previewer) After(done int, decode func() (*image.NRGBA, error)) error {
	if v == nil || v.next >= len(v.at) || v.at[v.next] != done {
		return nil
	}
	img, err := decode()
	if err != nil {
		return fmt.Errorf("preview: %w", err)
	}
	for ; v.next < len(v.at) && v.at[v.next] == done; v.next++ {
		v.partial(v.next, img)
	}
	return nil
}
