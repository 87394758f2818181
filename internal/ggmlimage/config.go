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
	// Float16Matrices keeps the transformer's matrices in float16 where
	// they would be bfloat16 (tensor.Backend.FastBFloat16): benchmarks set
	// it to compare the two.
	Float16Matrices bool
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
	return nil
}
