// Package ggmlimage runs SD3's parts as ggml graphs written on ollama's ml
// package, the engine and CUDA build that text runs on. Weights come from
// GGUF files in diffusers' names (internal/sd3 lists them); each part is
// one file and one ggml backend.
package ggmlimage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/ollama/ollama/ml"
	_ "github.com/ollama/ollama/ml/backend" // registers the ggml backend

	"github.com/genq/genq/internal/sd3"
)

// part is one loaded GGUF file: its weights on a ggml backend.
type part struct {
	path    string
	backend ml.Backend
	// mu makes one call at a time, shared by all parts of a Backend: a
	// graph's outputs live in the backend's compute buffer, which the next
	// compute reuses, and ollama keeps one ggml CPU backend (and its work
	// buffer) per device for the whole process, which two graphs computing
	// at once would both write.
	mu *sync.Mutex
}

// openPart reads a part's configuration from its file's metadata
// (configOf), checks the file against the tensors that configuration has,
// then loads it. A missing or misshapen tensor fails
// before anything is allocated, naming the tensor in one line.
func openPart[C any](ctx context.Context, path string, opts loadOptions,
	configOf func(fsggml.KV) (C, error), tensors func(C) []sd3.Spec) (p *part, cfg C, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, cfg, err
	}
	meta, err := fsggml.Decode(f, -1)
	f.Close()
	if err != nil {
		return nil, cfg, fmt.Errorf("%s: not a GGUF file: %w", path, err)
	}
	if cfg, err = configOf(meta.KV()); err != nil {
		return nil, cfg, fmt.Errorf("%s: %w", path, err)
	}
	specs := tensors(cfg)
	if err := sd3.CheckShapes(path, meta.Tensors(), specs); err != nil {
		return nil, cfg, err
	}
	defer recoverError(&err) // ggml panics when memory runs out
	params := ml.BackendParams{AllocMemory: true, NumThreads: opts.threads}
	if opts.gpu != nil {
		// Every block and the output "layer" on the GPU.
		layers := make([]int, meta.KV().BlockCount()+1)
		for i := range layers {
			layers[i] = i
		}
		params.GPULayers = ml.GPULayersList{{DeviceID: opts.gpu.id, Layers: layers}}
		params.FlashAttention = ml.FlashAttentionEnabled
	}
	b, err := ml.NewBackend(path, params)
	if err != nil {
		return nil, cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := b.Load(ctx, nil); err != nil {
		b.Close()
		return nil, cfg, fmt.Errorf("%s: %w", path, err)
	}
	mu := opts.compute
	if mu == nil {
		mu = new(sync.Mutex)
	}
	return &part{path: path, backend: b, mu: mu}, cfg, nil
}

// loadOptions say where a part's weights go.
type loadOptions struct {
	threads int
	gpu     *gpuDevice  // nil: the CPU
	compute *sync.Mutex // shared by the parts of one Backend; nil: the part's own
}

// gpuDevice is the CUDA device ggml found.
type gpuDevice struct {
	id   ml.DeviceID
	name string
	free uint64 // bytes free when probed, before any weight was loaded
}

// findGPU asks ggml for a CUDA device, loading nothing of the file at path
// but its metadata. DeviceCPU never looks; DeviceCUDA fails without one.
func findGPU(path, want string) (gpu *gpuDevice, err error) {
	if want == DeviceCPU {
		return nil, nil
	}
	var devices []ml.DeviceInfo
	probe := func() (err error) {
		defer recoverError(&err)
		b, err := ml.NewBackend(path, ml.BackendParams{GPULayers: ml.GPULayersList{{}}})
		if err != nil {
			return err
		}
		defer b.Close()
		devices = b.BackendDevices()
		return nil
	}
	if err := probe(); err != nil {
		return nil, fmt.Errorf("image device: probing ggml's devices with %s: %w", path, err)
	}
	for _, d := range devices {
		if strings.EqualFold(d.Library, "CUDA") {
			return &gpuDevice{id: d.DeviceID, name: cmp.Or(d.Description, d.Name), free: d.FreeMemory}, nil
		}
	}
	if want == DeviceCUDA {
		return nil, fmt.Errorf("image device cuda: ggml found no CUDA GPU (is the engine built with CUDA?)")
	}
	return nil, nil
}

func (p *part) close() {
	if p != nil && p.backend != nil {
		p.backend.Close()
		p.backend = nil
	}
}

// weight returns a tensor openPart has checked to be there.
func (p *part) weight(name string) ml.Tensor {
	t := p.backend.Get(name)
	if t == nil {
		panic(fmt.Sprintf("%s: tensor %s not loaded", p.path, name)) // openPart checked every name
	}
	return t
}

// conv is a 2-D convolution with bias, stride 1, as torch's Conv2d.
func (p *part) conv(ctx ml.Context, prefix string, x ml.Tensor, pad int) ml.Tensor {
	y := p.weight(prefix+"weight").Conv2D(ctx, x, 1, 1, pad, pad, 1, 1)
	return y.Add(ctx, p.weight(prefix+"bias").Reshape(ctx, 1, 1, -1))
}

// linear is torch's Linear over the first dimension.
func (p *part) linear(ctx ml.Context, prefix string, x ml.Tensor) ml.Tensor {
	return p.weight(prefix+"weight").Mulmat(ctx, x).Add(ctx, p.weight(prefix+"bias"))
}

// groupNorm is torch's GroupNorm on x [W, H, C, N]: each group of C/groups
// channels is normalized over its channels and pixels together, which in
// ggml's layout is one contiguous row per group.
func (p *part) groupNorm(ctx ml.Context, prefix string, x ml.Tensor, groups int, eps float32) ml.Tensor {
	w, h, c, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	y := x.Contiguous(ctx).Reshape(ctx, w*h*c/groups, groups, n).LayerNorm(ctx, nil, nil, eps)
	y = y.Reshape(ctx, w, h, c, n)
	return y.Mul(ctx, p.weight(prefix+"weight").Reshape(ctx, 1, 1, c)).Add(ctx, p.weight(prefix+"bias").Reshape(ctx, 1, 1, c))
}

// recoverError turns a panic into *err: ggml reports a failed allocation
// or compute by panicking, which must fail the job, not the worker. Call it
// deferred, directly.
func recoverError(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(error); ok {
		*err = e
		return
	}
	*err = fmt.Errorf("%v", r)
}

// geluTanh is GELU's tanh approximation (torch's approximate="tanh",
// transformers' gelu_new), written out: ggml's fused GELU reads a float16
// table on the CPU, an error that grows through the layers.
func geluTanh(ctx ml.Context, x ml.Tensor) ml.Tensor {
	inner := x.Add(ctx, x.Mul(ctx, x).Mul(ctx, x).Scale(ctx, 0.044715)).Scale(ctx, math.Sqrt(2/math.Pi)).Tanh(ctx)
	return x.Add(ctx, x.Mul(ctx, inner)).Scale(ctx, 0.5)
}
