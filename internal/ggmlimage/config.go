package ggmlimage

import (
	"fmt"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/envflag"
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

// Config is how the ggml image backend runs: the pipeline's settings,
// which the ONNX engine shares, and the ggml engine's own. The worker
// main fills ModelDir and Slots from its own flags.
type Config struct {
	ModelDir string
	Slots    int
	// Pipeline's Threads is ggml's CPU thread count; 0 uses every core.
	diffusion.Pipeline
	// MaxBatch is the most batch items one transformer call takes; each
	// image's step brings two (negative prompt and prompt). Concurrent
	// jobs share calls up to it. 0: sized from the memory the device has
	// left beside the weights, for images of MaxSize, up to two per slot.
	MaxBatch int
	// NoT5 leaves T5 unloaded and gives the transformer zeros in its place,
	// as SD3 allows (IMAGE_T5=off): T5-XXL is most of SD3-medium's weights.
	NoT5 bool
	t5   string // IMAGE_T5: on, or off for NoT5
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

// RegisterFlags binds the ggml engine's own settings; the IMAGE_*
// settings of the pipeline are diffusion.Pipeline's.
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.t5, "image-t5", "IMAGE_T5", "on", "image engine ggml: off leaves T5 unloaded and gives the transformer zeros in its 256 rows, as SD3 allows (the ONNX engine always runs T5)")
	fs.String(&c.BLAS, "image-blas", "IMAGE_BLAS", tensor.BLASAuto, "image engine ggml on the CPU: auto or on runs its matrix products through OpenBLAS (ggml's BLAS backend, built where OpenBLAS is installed; on fails without it): faster, and for SD3-medium at 1024² about 8 GB more memory (docs/image.md); auto leaves it out where IMAGE_BFLOAT16 takes bfloat16 on more than one thread; off: ggml's own kernels")
	fs.String(&c.BFloat16, "image-bfloat16", "IMAGE_BFLOAT16", BFloat16Auto, "image engine ggml: auto multiplies the transformer's per-token matrices (and on the CPU the VAE's inner 3×3 convolutions) in bfloat16 with float32 sums where the device does so natively (CUDA from Ampere on, a CPU with AVX512_BF16): faster, with values rounded to bfloat16; on does so everywhere, slower where not native; off keeps the weights' float16, closer to the reference (docs/image.md)")
	fs.String(&c.BLASKernels, "image-blas-kernels", "IMAGE_BLAS_KERNELS", "", "OpenBLAS kernels for IMAGE_BLAS (OPENBLAS_CORETYPE, e.g. SkylakeX); empty: those OpenBLAS picks for the CPU, whatever OPENBLAS_CORETYPE the worker inherits")
}

// T5Off reports whether IMAGE_T5 says off: the worker refuses that with
// the ONNX engine, which always runs T5.
func (c Config) T5Off() bool { return c.t5 == "off" }

func (c Config) validate() error {
	if c.ModelDir == "" {
		return fmt.Errorf("no model directory given")
	}
	if err := c.Pipeline.Validate(); err != nil {
		return err
	}
	switch c.t5 {
	case "", "on", "off":
	default:
		return fmt.Errorf("IMAGE_T5 %q: want on or off", c.t5)
	}
	switch c.BFloat16 {
	case "", BFloat16Auto, BFloat16On, BFloat16Off:
	default:
		return fmt.Errorf("IMAGE_BFLOAT16 %q: want auto, on or off", c.BFloat16)
	}
	switch c.BLAS {
	case "", tensor.BLASAuto, tensor.BLASOn, tensor.BLASOff:
	default:
		return fmt.Errorf("IMAGE_BLAS %q: want auto, on or off", c.BLAS)
	}
	return nil
}
