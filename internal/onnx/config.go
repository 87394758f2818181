// Package onnx is genq's image backend: it runs a diffusers-layout ONNX
// export (as `optimum-cli export onnx` writes it) of Stable Diffusion 3, or
// of SD 1.5 or SDXL, through ONNX Runtime, on CUDA when the library and a
// GPU allow, else on the CPU. *Backend implements genq.Backend.
package onnx

import (
	"fmt"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/envflag"
)

// DefaultLibraryPath is where scripts/fetch-onnxruntime.sh puts the CPU
// build of ONNX Runtime.
const DefaultLibraryPath = "lib/onnxruntime/libonnxruntime.so.1"

// Device choices for Config.Device.
const (
	DeviceAuto = "auto" // CUDA when the library has it and a GPU is present
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda" // CUDA or fail at start-up
)

// Config is how the image backend runs. The worker main fills ModelDir and
// Slots from its own flags; RegisterFlags binds the rest.
type Config struct {
	ModelDir string
	Slots    int

	LibraryPath string // ONNXRUNTIME_LIB
	Device      string // auto, cpu or cuda

	Width, Height int
	Steps         int
	GuidanceScale float64
	// Seed 0 draws a random seed per request; any other value makes every
	// image of the same prompt identical.
	Seed int64
	// MaxSize and MaxSteps bound what one request may ask for (each side,
	// in pixels; denoising steps): a job over them is invalid.
	MaxSize  int
	MaxSteps int
	// Threads is ONNX Runtime's intra-op thread count per session; 0 lets
	// it use every core.
	Threads int
}

// Defaults of variant C's pipeline parameters (docs/image.md) and
// of SD3-medium.
const (
	DefaultSize          = 1024
	DefaultSteps         = 28
	DefaultGuidanceScale = 7.0
	DefaultMaxSteps      = 100
)

// RegisterFlags binds the IMAGE_* settings and ONNXRUNTIME_LIB.
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.LibraryPath, "onnxruntime-lib", "ONNXRUNTIME_LIB", DefaultLibraryPath, "path of the ONNX Runtime shared library (a CUDA build enables the GPU)")
	fs.String(&c.Device, "image-device", "IMAGE_DEVICE", DeviceAuto, "image backend device: auto, cpu or cuda")
	fs.Int(&c.Width, "image-width", "IMAGE_WIDTH", DefaultSize, "image width in pixels, a multiple of 16")
	fs.Int(&c.Height, "image-height", "IMAGE_HEIGHT", DefaultSize, "image height in pixels, a multiple of 16")
	fs.Int(&c.Steps, "image-steps", "IMAGE_STEPS", DefaultSteps, "denoising steps per image: a job's num_inference_steps when it gives none")
	fs.Float64(&c.GuidanceScale, "image-guidance-scale", "IMAGE_GUIDANCE_SCALE", DefaultGuidanceScale, "classifier-free guidance scale: a job's guidance_scale when it gives none")
	fs.Int64(&c.Seed, "image-seed", "IMAGE_SEED", 0, "noise seed: 0 draws one per request (logged at debug level), any other value gives every request of the same prompt the same bytes")
	fs.Int(&c.MaxSize, "image-max-size", "IMAGE_MAX_SIZE", DefaultSize, "largest width or height a request may ask for (at least the configured size)")
	fs.Int(&c.MaxSteps, "image-max-steps", "IMAGE_MAX_STEPS", DefaultMaxSteps, "most denoising steps a request may ask for")
	fs.Int(&c.Threads, "image-threads", "IMAGE_THREADS", 0, "intra-op threads per model (0: all cores; the ggml engine gives a transformer file under 80 MB one)")
}

// withDefaults fills zero values, so a Config literal in a test or tool
// needs only ModelDir.
func (c Config) withDefaults() Config {
	if c.Slots <= 0 {
		c.Slots = 1
	}
	if c.LibraryPath == "" {
		c.LibraryPath = DefaultLibraryPath
	}
	if c.Device == "" {
		c.Device = DeviceAuto
	}
	if c.Width == 0 {
		c.Width = DefaultSize
	}
	if c.Height == 0 {
		c.Height = DefaultSize
	}
	if c.Steps == 0 {
		c.Steps = DefaultSteps
	}
	if c.GuidanceScale == 0 {
		c.GuidanceScale = DefaultGuidanceScale
	}
	// The configured size and steps are always allowed.
	c.MaxSize = max(c.MaxSize, c.Width, c.Height)
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	c.MaxSteps = max(c.MaxSteps, c.Steps)
	return c
}

func (c Config) validate() error {
	if err := diffusion.CheckSettings(c.Width, c.Height, c.Steps, c.Threads); err != nil {
		return err
	}
	switch c.Device {
	case DeviceAuto, DeviceCPU, DeviceCUDA:
	default:
		return fmt.Errorf("image device %q: want auto, cpu or cuda", c.Device)
	}
	if c.ModelDir == "" {
		return fmt.Errorf("no model directory given")
	}
	return nil
}
