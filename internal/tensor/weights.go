package tensor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/genq/genq/internal/gguf"
)

// Weights are a GGUF file's tensors, in a buffer of the backend, and
// those derived from them (Derive).
type Weights struct {
	be      *Backend
	ctx     unsafe.Pointer
	buf     unsafe.Pointer
	byName  map[string]unsafe.Pointer
	derived []derivedWeights
}

// derivedWeights are the tensors of one Derive, in a buffer of their own.
type derivedWeights struct{ ctx, buf unsafe.Pointer }

// Fusion lays matrices of one width and type side by side, as the rows of
// one matrix called Name: one product with it computes the products with
// all of them (a Slice of its result's first dimension is each one's),
// converting the other operand once. Each part stays a weight of its own
// name, a view into it.
type Fusion struct {
	Name  string
	Parts []string
}

// Layout is how LoadWeights lays a file's tensors out in the backend.
type Layout struct {
	Fusions []Fusion
	// BFloat16 names the float16 matrices (a Fusion by its Name) to keep
	// as bfloat16: a product with one then runs in bfloat16 with float32
	// sums and result, where ggml-cuda's float16 product sums in float16
	// and converts its result (Backend.FastBFloat16). nil keeps every
	// tensor's type.
	BFloat16 func(name string) bool
	// Float32 names the float16 matrices to keep as float32, on a CPU
	// whose products run through the BLAS backend (Device.BLAS), which
	// would otherwise convert such a matrix to float32 at every product,
	// for twice the memory (ONNX Runtime's CPU export holds them as
	// float32 too; the figures are in docs/image.md). nil keeps every
	// tensor's type.
	Float32 func(name string) bool
}

// LoadWeights reads every tensor of the GGUF file at path into the
// backend, laid out as l says. head is the file's header when the caller
// has read it already; nil reads it.
func (be *Backend) LoadWeights(path string, head *gguf.File, l Layout) (*Weights, error) {
	fusions := l.Fusions
	// retype is the type a tensor of the file's type typ is kept as.
	retype := func(name string, typ uint32) int32 {
		switch {
		case typ != uint32(gguf.TensorF16):
		case l.BFloat16 != nil && l.BFloat16(name):
			return typeBF16
		case l.Float32 != nil && l.Float32(name):
			return typeF32
		}
		return int32(typ)
	}
	a := be.a
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	file := head
	if file == nil {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if file, err = gguf.Read(f, st.Size()); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	w := &Weights{be: be, byName: map[string]unsafe.Pointer{}}
	w.ctx = a.newContext(uintptr(len(file.Tensors)+len(fusions)+1) * a.tensorOverhead())
	infos := map[string]gguf.TensorInfo{}
	for _, t := range file.Tensors {
		infos[t.Name] = t
	}
	fused := map[string]bool{}
	for _, f := range fusions {
		if err := w.fuse(f, infos, retype); err != nil {
			w.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, name := range f.Parts {
			fused[name] = true
		}
	}
	for _, t := range file.Tensors {
		if len(t.Shape) > 4 {
			w.Close()
			return nil, fmt.Errorf("%s: tensor %s has %d dimensions", path, t.Name, len(t.Shape))
		}
		if fused[t.Name] {
			continue
		}
		var shape []int
		for _, n := range t.Shape {
			shape = append(shape, int(n))
		}
		ne := dims(shape)
		w.byName[t.Name] = a.newTensor4d(w.ctx, retype(t.Name, uint32(t.Type)), ne[0], ne[1], ne[2], ne[3])
	}
	if w.buf = a.allocCtxTensors(w.ctx, be.b); w.buf == nil {
		w.Close()
		return nil, fmt.Errorf("%s: no memory for the weights", path)
	}
	var data, wide []byte
	for _, t := range file.Tensors {
		gt := w.byName[t.Name]
		kept := (*header)(gt).typ
		n := a.nbytes(gt) // the same in bfloat16 as in float16
		if kept == typeF32 && t.Type == gguf.TensorF16 {
			n /= 2 // the file's float16 values, widened below
		}
		if uintptr(cap(data)) < n {
			data = make([]byte, n)
		}
		data = data[:n]
		if _, err := f.ReadAt(data, int64(t.Offset)); err != nil && !(errors.Is(err, io.EOF) && uintptr(len(data)) == n) {
			w.Close()
			return nil, fmt.Errorf("%s: read %s: %w", path, t.Name, err)
		}
		out := data
		if t.Type == gguf.TensorF16 && kept != typeF16 {
			halves := unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), n/2)
			switch kept {
			case typeBF16:
				float16ToBFloat16(halves)
			case typeF32:
				if uintptr(cap(wide)) < 2*n {
					wide = make([]byte, 2*n)
				}
				out = wide[:2*n]
				float16ToFloat32(unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), n/2), halves)
			}
		}
		a.tensorSet(gt, unsafe.Pointer(&out[0]), 0, uintptr(len(out)))
	}
	return w, nil
}

// fuse makes f's matrix and its parts, views of its rows.
func (w *Weights) fuse(f Fusion, infos map[string]gguf.TensorInfo, retype func(string, uint32) int32) error {
	a := w.be.a
	var width, rows int64
	var typ uint32
	for i, name := range f.Parts {
		t, ok := infos[name]
		switch {
		case !ok:
			return fmt.Errorf("fusion %s: no tensor %s", f.Name, name)
		case len(t.Shape) != 2:
			return fmt.Errorf("fusion %s: tensor %s is not a matrix", f.Name, name)
		case i > 0 && (int64(t.Shape[0]) != width || uint32(t.Type) != typ):
			return fmt.Errorf("fusion %s: tensor %s is not of %s's width and type", f.Name, name, f.Parts[0])
		}
		width, typ = int64(t.Shape[0]), uint32(t.Type)
		rows += int64(t.Shape[1])
	}
	whole := a.newTensor4d(w.ctx, retype(f.Name, typ), width, rows, 1, 1)
	w.byName[f.Name] = whole
	rowBytes := uintptr((*header)(whole).nb[1])
	var at int64
	for _, name := range f.Parts {
		n := int64(infos[name].Shape[1])
		w.byName[name] = a.view4d(w.ctx, whole, width, n, 1, 1, rowBytes, rowBytes*uintptr(n), rowBytes*uintptr(n), uintptr(at)*rowBytes)
		at += n
	}
	return nil
}

// Derive adds weights computed once from the weights, rather than at
// every use: compute builds them on a graph of the backend, and they are
// kept as float32 weights of the names it gives, one a tensor.
func (w *Weights) Derive(compute func(g *Graph) (names []string, outs []Tensor)) error {
	g := w.be.NewGraph()
	defer g.Close()
	names, outs := compute(g)
	if len(outs) != len(names) || len(outs) == 0 {
		return fmt.Errorf("derive: %d tensors for %d names", len(outs), len(names))
	}
	vals, err := g.ComputeAll(outs...)
	if err != nil {
		return fmt.Errorf("derive: %w", err)
	}
	a := w.be.a
	d := derivedWeights{ctx: a.newContext(uintptr(len(names)+1) * a.tensorOverhead())}
	ts := make([]unsafe.Pointer, len(names))
	for i, out := range outs {
		ne := shapeOf(out.t)
		ts[i] = a.newTensor4d(d.ctx, typeF32, ne[0], ne[1], ne[2], ne[3])
	}
	if d.buf = a.allocCtxTensors(d.ctx, w.be.b); d.buf == nil {
		a.free(d.ctx)
		return errors.New("derive: no memory for the derived weights")
	}
	w.derived = append(w.derived, d)
	for i, name := range names {
		a.tensorSet(ts[i], unsafe.Pointer(&vals[i][0]), 0, uintptr(4*len(vals[i])))
		w.byName[name] = ts[i]
	}
	return nil
}

// Close frees the weights.
func (w *Weights) Close() {
	if w == nil {
		return
	}
	for _, d := range w.derived {
		w.be.a.bufferFree(d.buf)
		w.be.a.free(d.ctx)
	}
	w.derived = nil
	if w.buf != nil {
		w.be.a.bufferFree(w.buf)
		w.buf = nil
	}
	if w.ctx != nil {
		w.be.a.free(w.ctx)
		w.ctx = nil
	}
}
