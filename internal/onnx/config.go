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
	DeviceAuto = diffusion.DeviceAuto // CUDA when the library has it and a GPU is present
	DeviceCPU  = diffusion.DeviceCPU
	DeviceCUDA = diffusion.DeviceCUDA // CUDA or fail at start-up
)

// Config is how the image backend runs: the pipeline's settings, which
// the ggml engine shares, and ONNX Runtime's library. The worker main
// fills ModelDir and Slots from its own flags.
type Config struct {
	ModelDir string
	Slots    int

	LibraryPath string // ONNXRUNTIME_LIB

	// Pipeline's Threads is ONNX Runtime's intra-op thread count per
	// session; 0 lets it use every core.
	diffusion.Pipeline
}

// RegisterFlags binds ONNXRUNTIME_LIB; the IMAGE_* settings are the
// pipeline's (diffusion.Pipeline.RegisterFlags).
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.LibraryPath, "onnxruntime-lib", "ONNXRUNTIME_LIB", DefaultLibraryPath, "path of the ONNX Runtime shared library (a CUDA build enables the GPU)")
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
	c.Pipeline = c.Pipeline.WithDefaults()
	return c
}

func (c Config) validate() error {
	if err := c.Pipeline.Validate(); err != nil {
		return err
	}
	if c.ModelDir == "" {
		return fmt.Errorf("no model directory given")
	}
	return nil
}
