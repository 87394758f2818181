package tensor

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/genq/genq/internal/gguf"
)

// Backend is a ggml device that computes graphs: the CPU.
type Backend struct {
	a *api
	b unsafe.Pointer
	// galloc lays out every graph's intermediate tensors in one buffer,
	// kept from graph to graph: allocated afresh each time, its pages
	// were touched for the first time by every computation.
	galloc unsafe.Pointer
}

// ggml's device types (enum ggml_backend_dev_type).
const devCPU = 0

// NewCPU opens ggml's CPU backend from the text engine's libraries in dir
// (LLAMA_LIB_DIR when empty), computing on threads threads.
func NewCPU(dir string, threads int, log *slog.Logger) (*Backend, error) {
	a, err := load(dir, log)
	if err != nil {
		return nil, err
	}
	dev := a.devByType(devCPU)
	if dev == nil {
		return nil, errors.New("ggml: no CPU device")
	}
	b := a.devInit(dev, nil)
	if b == nil {
		return nil, errors.New("ggml: the CPU backend did not start")
	}
	if p := a.regProcAddress(a.devBackendReg(dev), "ggml_backend_set_n_threads"); p != 0 && threads > 0 {
		var setThreads func(b unsafe.Pointer, n int32)
		purego.RegisterFunc(&setThreads, p)
		setThreads(b, int32(threads))
	}
	return &Backend{a: a, b: b}, nil
}

// Close frees the backend.
func (be *Backend) Close() {
	if be == nil {
		return
	}
	if be.galloc != nil {
		be.a.gallocrFree(be.galloc)
		be.galloc = nil
	}
	if be.b != nil {
		be.a.backendFree(be.b)
		be.b = nil
	}
}

// Weights are a GGUF file's tensors, in a buffer of the backend.
type Weights struct {
	be     *Backend
	ctx    unsafe.Pointer
	buf    unsafe.Pointer
	byName map[string]unsafe.Pointer
}

// LoadWeights reads every tensor of the GGUF file at path into the backend.
func (be *Backend) LoadWeights(path string) (*Weights, error) {
	a := be.a
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	file, err := gguf.Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w := &Weights{be: be, byName: map[string]unsafe.Pointer{}}
	w.ctx = a.newContext(uintptr(len(file.Tensors)+1) * a.tensorOverhead())
	for _, t := range file.Tensors {
		if len(t.Shape) > 4 {
			w.Close()
			return nil, fmt.Errorf("%s: tensor %s has %d dimensions", path, t.Name, len(t.Shape))
		}
		var shape []int
		for _, n := range t.Shape {
			shape = append(shape, int(n))
		}
		ne := dims(shape)
		w.byName[t.Name] = a.newTensor4d(w.ctx, int32(t.Type), ne[0], ne[1], ne[2], ne[3])
	}
	if w.buf = a.allocCtxTensors(w.ctx, be.b); w.buf == nil {
		w.Close()
		return nil, fmt.Errorf("%s: no memory for the weights", path)
	}
	var data []byte
	for _, t := range file.Tensors {
		gt := w.byName[t.Name]
		n := a.nbytes(gt)
		if uintptr(cap(data)) < n {
			data = make([]byte, n)
		}
		data = data[:n]
		if _, err := f.ReadAt(data, int64(t.Offset)); err != nil && !(errors.Is(err, io.EOF) && uintptr(len(data)) == n) {
			w.Close()
			return nil, fmt.Errorf("%s: read %s: %w", path, t.Name, err)
		}
		a.tensorSet(gt, unsafe.Pointer(&data[0]), 0, n)
	}
	return w, nil
}

// Close frees the weights.
func (w *Weights) Close() {
	if w == nil {
		return
	}
	if w.buf != nil {
		w.be.a.bufferFree(w.buf)
		w.buf = nil
	}
	if w.ctx != nil {
		w.be.a.free(w.ctx)
		w.ctx = nil
	}
}

// Graph is one computation: its inputs, its operations, its output.
type Graph struct {
	be     *Backend
	ctx    unsafe.Pointer
	g      unsafe.Pointer
	inputs []input
}

type input struct {
	t    unsafe.Pointer
	data []float32
}

// maxNodes bounds a graph's operations.
const maxNodes = 16384

// NewGraph starts a computation on the backend.
func (be *Backend) NewGraph() *Graph {
	a := be.a
	ctx := a.newContext(maxNodes*a.tensorOverhead() + a.graphOverhead(maxNodes, false))
	return &Graph{be: be, ctx: ctx, g: a.newGraphCustom(ctx, maxNodes, false)}
}

// Close frees the graph's tensors.
func (g *Graph) Close() {
	if g.ctx != nil {
		g.be.a.free(g.ctx)
		g.ctx = nil
	}
}

// Tensor is a tensor of a graph: an input, a weight or an operation's
// result. Dimensions count from the fastest-varying, as ggml's do.
type Tensor struct {
	g *Graph
	t unsafe.Pointer
}

// Input is a float32 tensor of shape ne whose values are data.
func (g *Graph) Input(data []float32, ne ...int) Tensor {
	d := dims(ne)
	t := g.be.a.newTensor4d(g.ctx, 0, d[0], d[1], d[2], d[3])
	g.be.a.setInput(t)
	g.inputs = append(g.inputs, input{t, data})
	return Tensor{g, t}
}

// Weight is w's tensor called name.
func (g *Graph) Weight(w *Weights, name string) Tensor {
	t, ok := w.byName[name]
	if !ok {
		panic(fmt.Sprintf("tensor: no weight %s", name)) // the caller checked the file's tensors
	}
	return Tensor{g, t}
}

// Compute runs the graph to out and returns out's values (float32). One
// graph computes at a time on a backend.
func (g *Graph) Compute(out Tensor) ([]float32, error) {
	a := g.be.a
	a.setOutput(out.t)
	a.buildForward(g.g, out.t)
	if g.be.galloc == nil {
		g.be.galloc = a.gallocrNew(a.defaultBufferType(g.be.b))
	}
	if !a.gallocrAllocGraph(g.be.galloc, g.g) {
		return nil, errors.New("ggml: no memory for the graph")
	}
	for _, in := range g.inputs {
		if n := a.nbytes(in.t); n != uintptr(len(in.data))*4 {
			return nil, fmt.Errorf("ggml: input of %d bytes given %d values", n, len(in.data))
		}
		a.tensorSet(in.t, unsafe.Pointer(&in.data[0]), 0, uintptr(len(in.data))*4)
	}
	if status := a.graphCompute(g.be.b, g.g); status != 0 {
		return nil, fmt.Errorf("ggml: compute failed (status %d)", status)
	}
	n := a.nbytes(out.t)
	vals := make([]float32, n/4)
	a.tensorGet(out.t, unsafe.Pointer(&vals[0]), 0, n)
	return vals, nil
}

// dims is a shape of up to four dimensions as ggml takes it, the missing
// ones 1.
func dims(ne []int) [4]int64 {
	d := [4]int64{1, 1, 1, 1}
	for i, n := range ne {
		d[i] = int64(n)
	}
	return d
}

// Dim is the size of dimension i.
func (t Tensor) Dim(i int) int { return int(shapeOf(t.t)[i]) }

func (t Tensor) op(r unsafe.Pointer) Tensor { return Tensor{t.g, r} }

// Add is t + u, u broadcast over t.
func (t Tensor) Add(u Tensor) Tensor { return t.op(t.g.be.a.add(t.g.ctx, t.t, u.t)) }

// Mul is t × u element-wise, u broadcast over t.
func (t Tensor) Mul(u Tensor) Tensor { return t.op(t.g.be.a.mul(t.g.ctx, t.t, u.t)) }

// MulMat is ggml_mul_mat(t, u): the products of t's rows with u's rows.
func (t Tensor) MulMat(u Tensor) Tensor { return t.op(t.g.be.a.mulMat(t.g.ctx, t.t, u.t)) }

// Scale is t × s.
func (t Tensor) Scale(s float64) Tensor { return t.op(t.g.be.a.scale(t.g.ctx, t.t, float32(s))) }

// Norm normalizes each row to zero mean and unit variance.
func (t Tensor) Norm(eps float32) Tensor { return t.op(t.g.be.a.norm(t.g.ctx, t.t, eps)) }

// SILU is x·sigmoid(x).
func (t Tensor) SILU() Tensor { return t.op(t.g.be.a.silu(t.g.ctx, t.t)) }

// SoftMax is the softmax of each row.
func (t Tensor) SoftMax() Tensor { return t.op(t.g.be.a.softMax(t.g.ctx, t.t)) }

// Contiguous lays t out in order.
func (t Tensor) Contiguous() Tensor { return t.op(t.g.be.a.cont(t.g.ctx, t.t)) }

// Reshape views t with shape ne.
func (t Tensor) Reshape(ne ...int) Tensor {
	d := dims(ne)
	return t.op(t.g.be.a.reshape4d(t.g.ctx, t.t, d[0], d[1], d[2], d[3]))
}

// Permute moves dimension i to axes[i].
func (t Tensor) Permute(a0, a1, a2, a3 int) Tensor {
	return t.op(t.g.be.a.permute(t.g.ctx, t.t, int32(a0), int32(a1), int32(a2), int32(a3)))
}

// Conv2D convolves x [W, H, Cin, N] with the kernel t [KW, KH, Cin, Cout]
// (im2col and a matrix product: on the CPU faster than ggml's direct
// kernel, scripts/ggml-conv-bench.c).
func (t Tensor) Conv2D(x Tensor, s0, s1, p0, p1, d0, d1 int) Tensor {
	return t.op(t.g.be.a.conv2d(t.g.ctx, t.t, x.t, int32(s0), int32(s1), int32(p0), int32(p1), int32(d0), int32(d1)))
}

// UpscaleNearest resizes t to ne by nearest-neighbour sampling.
func (t Tensor) UpscaleNearest(ne [4]int) Tensor {
	return t.op(t.g.be.a.interpolate(t.g.ctx, t.t, int64(ne[0]), int64(ne[1]), int64(ne[2]), int64(ne[3]), 0))
}
