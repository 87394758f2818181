package tensor

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Graph is one computation: its inputs, its operations, its output.
type Graph struct {
	be     *Backend
	ctx    unsafe.Pointer
	g      unsafe.Pointer
	inputs []input
	// constants are the graph's Ones, Identity and key masks, made once
	// each: their kind and shape.
	constants map[[3]int]Tensor
	// outs are the outputs of the first ComputeAll, which later ones
	// compute again (SetInput).
	outs []Tensor
	// runs are the stretches of the graph's operations and the backend
	// of each, where a BLAS backend computes the matrix products
	// (computeRuns); runsCtx holds them.
	runs    []run
	runsCtx unsafe.Pointer
}

type input struct {
	t     unsafe.Pointer
	data  unsafe.Pointer
	bytes uintptr
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
	if g.be.laidOut == g {
		g.be.laidOut = nil
	}
	if g.runsCtx != nil {
		g.be.a.free(g.runsCtx)
		g.runsCtx = nil
	}
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

// ggml's element types (enum ggml_type) of inputs.
const (
	typeF32  = 0
	typeF16  = 1
	typeI32  = 26
	typeBF16 = 30
)

// Input is a float32 tensor of shape ne whose values are data.
func (g *Graph) Input(data []float32, ne ...int) Tensor {
	return g.input(typeF32, unsafe.Pointer(unsafe.SliceData(data)), uintptr(len(data))*4, ne)
}

// InputInts is an int32 tensor of shape ne whose values are data: the
// indices GetRows takes.
func (g *Graph) InputInts(data []int32, ne ...int) Tensor {
	return g.input(typeI32, unsafe.Pointer(unsafe.SliceData(data)), uintptr(len(data))*4, ne)
}

// Ones is a vector of n ones, [n]; a graph makes each length once.
func (g *Graph) Ones(n int) Tensor {
	return g.constant([3]int{constOnes, n, 0}, func() Tensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return g.Input(v, n)
	})
}

// Identity is n identity matrices of c×c, [c, c, n]; a graph makes each
// shape once.
func (g *Graph) Identity(c, n int) Tensor {
	return g.constant([3]int{constIdentity, c, n}, func() Tensor {
		m := make([]float32, c*c*n)
		for i := range n {
			for j := range c {
				m[(i*c+j)*c+j] = 1
			}
		}
		return g.Input(m, c, c, n)
	})
}

// keyMask is the mask of keys padded from n to a multiple of
// keyPadding, for rows queries: [padded keys, rows], float16, 0 for the n
// keys and −∞ for the padding. A graph makes each shape once.
func (g *Graph) keyMask(n, rows int) Tensor {
	return g.constant([3]int{constKeyMask, n, rows}, func() Tensor {
		row := make([]float32, roundUp(n, keyPadding))
		for i := n; i < len(row); i++ {
			row[i] = float32(math.Inf(-1))
		}
		return g.Input(row, len(row)).Repeat(len(row), rows).cast(typeF16)
	})
}

// Zeros is a new tensor of shape ne, float32, every value 0.
func (g *Graph) Zeros(ne ...int) Tensor {
	d := dims(ne)
	return g.zero().shaped([4]int{int(d[0]), int(d[1]), int(d[2]), int(d[3])}).fill(0)
}

// zero is a single 0, [1].
func (g *Graph) zero() Tensor {
	return g.constant([3]int{constZero, 0, 0}, func() Tensor { return g.Input([]float32{0}, 1) })
}

// The kinds of a graph's constants.
const (
	constOnes = iota
	constIdentity
	constKeyMask
	constZero
)

func (g *Graph) constant(key [3]int, make func() Tensor) Tensor {
	if t, ok := g.constants[key]; ok {
		return t
	}
	if g.constants == nil {
		g.constants = map[[3]int]Tensor{}
	}
	t := make()
	g.constants[key] = t
	return t
}

func (g *Graph) input(typ int32, data unsafe.Pointer, bytes uintptr, ne []int) Tensor {
	d := dims(ne)
	t := g.be.a.newTensor4d(g.ctx, typ, d[0], d[1], d[2], d[3])
	g.be.a.setInput(t)
	g.inputs = append(g.inputs, input{t, data, bytes})
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
	vals, err := g.ComputeAll(out)
	if err != nil {
		return nil, err
	}
	return vals[0], nil
}

// Current reports whether g was the last graph the backend computed: only
// then can it compute again (SetInput). ggml lays a graph's tensors out in
// the compute buffer once; another graph's layout moves the buffer (when
// it needs a larger one) and reuses its memory, and a tensor laid out
// keeps its address.
func (g *Graph) Current() bool { return g.be.laidOut == g }

// SetInput gives the input t new values, data, for the graph's next
// computation: a Current graph computes again with them, without being
// built, checked or laid out anew, and the CUDA backend can replay the
// kernels it captured the time before.
func (g *Graph) SetInput(t Tensor, data []float32) error {
	for i := range g.inputs {
		if in := &g.inputs[i]; in.t == t.t {
			if n := uintptr(len(data)) * 4; n != in.bytes {
				return fmt.Errorf("ggml: input of %d bytes given %d", in.bytes, n)
			}
			in.data = unsafe.Pointer(unsafe.SliceData(data))
			return nil
		}
	}
	return errors.New("ggml: SetInput: not an input of the graph")
}

// ComputeAll runs the graph to every one of outs and returns their values
// (float32), in the order given. An output keeps its memory even where a
// later operation reads it. A graph computed before computes the same
// outputs again, whatever outs are given (SetInput).
func (g *Graph) ComputeAll(outs ...Tensor) ([][]float32, error) {
	a := g.be.a
	if g.outs == nil {
		outs = slices.Clone(outs)
		for i, out := range outs {
			if !out.contiguous() {
				outs[i] = out.Contiguous() // its values are read back in order
			}
		}
		for _, out := range outs {
			a.setOutput(out.t)
			a.buildForward(g.g, out.t)
		}
		// An operation the device cannot run would abort the process inside
		// ggml: refuse the graph instead, naming it.
		for i := range a.graphNodes(g.g) {
			if n := a.graphNode(g.g, i); !a.supportsOp(g.be.b, n) {
				return nil, fmt.Errorf("ggml: the %s backend cannot compute %s", g.be.device.Kind, a.opDesc(n))
			}
		}
		g.outs = outs
	} else if !g.Current() {
		return nil, errors.New("ggml: a graph computed again after another one: build it anew")
	}
	outs = g.outs
	if g.be.galloc == nil {
		g.be.galloc = a.gallocrNew(a.defaultBufferType(g.be.b))
	}
	g.be.laidOut = nil
	if !a.gallocrAllocGraph(g.be.galloc, g.g) {
		return nil, errors.New("ggml: no memory for the graph")
	}
	g.be.laidOut = g
	for _, in := range g.inputs {
		if (*header)(in.t).buffer == 0 {
			continue // no operation reads it, so the graph gave it no memory
		}
		if n := a.nbytes(in.t); n != in.bytes {
			return nil, fmt.Errorf("ggml: input of %d bytes given %d", n, in.bytes)
		}
		a.tensorSet(in.t, in.data, 0, in.bytes)
	}
	if g.be.profile != nil {
		if err := g.be.computeProfiled(g.g); err != nil {
			return nil, err
		}
	} else if g.be.blas != nil {
		if err := g.computeRuns(); err != nil {
			return nil, err
		}
	} else if status := a.graphCompute(g.be.b, g.g); status != 0 {
		return nil, fmt.Errorf("ggml: compute failed (status %d)", status)
	}
	vals := make([][]float32, len(outs))
	for i, out := range outs {
		if (*header)(out.t).typ != typeF32 {
			return nil, fmt.Errorf("ggml: output %d is not float32", i)
		}
		n := a.nbytes(out.t)
		vals[i] = make([]float32, n/4)
		a.tensorGet(out.t, unsafe.Pointer(unsafe.SliceData(vals[i])), 0, n)
	}
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
