package ggmlimage

import (
	"fmt"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/tensor"
)

// Device choices for Config.Device.
const (
	DeviceAuto = tensor.DeviceAuto // CUDA when the engine has it and a GPU is present
	DeviceCPU  = tensor.DeviceCPU
	DeviceCUDA = tensor.DeviceCUDA // CUDA or fail at start-up
)

// BFloat16 choices for Config.BFloat16.
const (
	BFloat16Auto = "auto"
	BFloat16On   = "on"
	BFloat16Off  = "off"
)

// Config is how the ggml image backend runs. The worker main fills it from
// the same IMAGE_* settings the ONNX engine reads.
type Config struct {
	ModelDir string
	Slots    int
	Device   string

	Width, Height, Steps int
	GuidanceScale        float64
	Seed                 int64
	MaxSize, MaxSteps    int
	// Threads is ggml's CPU thread count; 0 uses every core.
	Threads int
	// MaxBatch is the most batch items one transformer call takes; each
	// image's step brings two (negative prompt and prompt). Concurrent
	// jobs share calls up to it. 0: sized from the memory the device has
	// left beside the weights, for images of MaxSize, up to two per slot.
	MaxBatch int
	// NoT5 leaves T5 unloaded and gives the transformer zeros in its place,
	// as SD3 allows (IMAGE_T5=off): T5-XXL is most of SD3-medium's weights.
	NoT5 bool
	// AttentionGroups and GraphsFor are tensor.Options': benchmarks set the
	// first to compare, tests the second to check CUDA's graphs on the CPU.
	AttentionGroups int
	GraphsFor       string
	// FreshStepGraphs builds the transformer's graph anew at every step,
	// as before graphs were kept: benchmarks set it to measure what
	// keeping them saves.
	FreshStepGraphs bool
	// BFloat16 (IMAGE_BFLOAT16) says where the float16 weights the largest
	// products take are kept as bfloat16: BFloat16Auto (when empty) where
	// the device multiplies bfloat16 natively (tensor.Backend.FastBFloat16),
	// BFloat16On everywhere, BFloat16Off nowhere. On the CPU those are the
	// transformer's per-token matrices and the VAE's inner 3×3 kernels; on
	// CUDA, the transformer's per-token matrices.
	BFloat16 string
	// BLAS and BLASKernels are tensor.Options' (IMAGE_BLAS,
	// IMAGE_BLAS_KERNELS): whether the CPU's matrix products go through
	// ggml's BLAS backend, and which OpenBLAS kernels run them.
	BLAS, BLASKernels string
}

func (c Config) validate() error {
	if c.ModelDir == "" {
		return fmt.Errorf("no model directory given")
	}
	if err := diffusion.CheckSettings(c.Width, c.Height, c.Steps, c.Threads); err != nil {
		return err
	}
	switch c.Device {
	case DeviceAuto, DeviceCPU, DeviceCUDA:
	default:
		return fmt.Errorf("image device %q: want auto, cpu or cuda", c.Device)
	}
	switch c.BFloat16 {
	case "", BFloat16Auto, BFloat16On, BFloat16Off:
	default:
		return fmt.Errorf("image bfloat16 %q: want auto, on or off", c.BFloat16)
	}
	return nil
}
