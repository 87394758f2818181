package diffusion

import (
	"cmp"
	"fmt"

	"github.com/genq/genq/internal/envflag"
)

// Device choices for Pipeline.Device.
const (
	DeviceAuto = "auto" // CUDA when the engine has it and a GPU is present
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda" // CUDA or fail at start-up
)

// Defaults of variant C's pipeline (docs/image.md), SD3-medium's.
const (
	DefaultSize          = 1024
	DefaultSteps         = 28
	DefaultGuidanceScale = 7.0
	DefaultMaxSteps      = 100
)

// Pipeline is how images are made, whichever engine makes them: the
// IMAGE_* settings both image engines read, declared here once. Each
// engine's Config embeds it beside its own settings.
type Pipeline struct {
	Device        string // DeviceAuto, DeviceCPU or DeviceCUDA
	Width, Height int
	Steps         int
	GuidanceScale float64
	// Seed 0 draws a random seed per request; any other value makes every
	// image of the same prompt identical.
	Seed int64
	// MaxSize and MaxSteps bound what one request may ask for (each side,
	// in pixels; denoising steps): a job over them is invalid.
	MaxSize, MaxSteps int
	// Threads is the engine's CPU threads per model; 0 lets it choose.
	Threads int
}

// RegisterFlags binds the IMAGE_* settings both engines share.
func (p *Pipeline) RegisterFlags(fs *envflag.Set) {
	fs.String(&p.Device, "image-device", "IMAGE_DEVICE", DeviceAuto, "image backend device: auto, cpu or cuda")
	fs.Int(&p.Width, "image-width", "IMAGE_WIDTH", DefaultSize, "image width in pixels, a multiple of 16")
	fs.Int(&p.Height, "image-height", "IMAGE_HEIGHT", DefaultSize, "image height in pixels, a multiple of 16")
	fs.Int(&p.Steps, "image-steps", "IMAGE_STEPS", DefaultSteps, "denoising steps per image: a job's num_inference_steps when it gives none")
	fs.Float64(&p.GuidanceScale, "image-guidance-scale", "IMAGE_GUIDANCE_SCALE", DefaultGuidanceScale, "classifier-free guidance scale: a job's guidance_scale when it gives none")
	fs.Int64(&p.Seed, "image-seed", "IMAGE_SEED", 0, "noise seed: 0 draws one per request (logged at debug level), any other value gives every request of the same prompt the same bytes")
	fs.Int(&p.MaxSize, "image-max-size", "IMAGE_MAX_SIZE", DefaultSize, "largest width or height a request may ask for (at least the configured size)")
	fs.Int(&p.MaxSteps, "image-max-steps", "IMAGE_MAX_STEPS", DefaultMaxSteps, "most denoising steps a request may ask for")
	fs.Int(&p.Threads, "image-threads", "IMAGE_THREADS", 0, "intra-op threads per model (0: all cores; the ggml engine gives a transformer file under 80 MB one)")
}

// WithDefaults fills zero values, so that a Pipeline literal in a test or
// a tool needs only what it cares about; the configured size and steps
// are always allowed.
func (p Pipeline) WithDefaults() Pipeline {
	p.Device = cmp.Or(p.Device, DeviceAuto)
	p.Width, p.Height = cmp.Or(p.Width, DefaultSize), cmp.Or(p.Height, DefaultSize)
	p.Steps, p.MaxSteps = cmp.Or(p.Steps, DefaultSteps), cmp.Or(p.MaxSteps, DefaultMaxSteps)
	p.GuidanceScale = cmp.Or(p.GuidanceScale, DefaultGuidanceScale)
	p.MaxSize = max(p.MaxSize, p.Width, p.Height)
	p.MaxSteps = max(p.MaxSteps, p.Steps)
	return p
}

// Validate checks the settings: the VAE works in 8×8 pixel blocks and
// SD3's transformer in 2×2 latent patches, so sizes are multiples of 16.
func (p Pipeline) Validate() error {
	if p.Width < 16 || p.Height < 16 || p.Width%16 != 0 || p.Height%16 != 0 {
		return fmt.Errorf("image size %dx%d: width and height must be multiples of 16, at least 16", p.Width, p.Height)
	}
	if p.Steps < 1 {
		return fmt.Errorf("image steps %d: want at least 1", p.Steps)
	}
	if p.Threads < 0 {
		return fmt.Errorf("image threads %d: want 0 or more", p.Threads)
	}
	switch p.Device {
	case DeviceAuto, DeviceCPU, DeviceCUDA:
	default:
		return fmt.Errorf("image device %q: want auto, cpu or cuda", p.Device)
	}
	return nil
}
