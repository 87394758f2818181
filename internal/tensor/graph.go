package tensor

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/genq/genq/internal/gguf"
)

// Backend is a ggml device that computes graphs: the CPU or a GPU.
type Backend struct {
	a      *api
	b      unsafe.Pointer
	device Device
	// galloc lays out every graph's intermediate tensors in one buffer,
	// kept from graph to graph: allocated afresh each time, its pages
	// were touched for the first time by every computation.
	galloc unsafe.Pointer
	// profile, when not nil, sums the time of each kind of operation
	// (Profile).
	profile map[string]*OpTime
	// groups is how many groups Queries splits each head's queries into;
	// 1 leaves them whole.
	groups int
	// forCUDA writes graphs for ggml-cuda's kernels (Options.GraphsFor):
	// Contiguous adds zero rather than copy.
	forCUDA bool
	// laidOut is the graph whose tensors the compute buffer holds now.
	laidOut *Graph
	// blas, when not nil, computes the matrix products of graphs on the
	// CPU (blas.go).
	blas *blas
}

// Device choices for Options.Device.
const (
	DeviceAuto = "auto" // a CUDA GPU when the engine has one, else the CPU
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda" // a CUDA GPU or an error
)

// Options say where a backend computes.
type Options struct {
	// LibDir holds the text engine's libraries; LLAMA_LIB_DIR when empty.
	LibDir string
	Device string // DeviceAuto when empty
	// Threads is the CPU backend's thread count; 0 leaves ggml's default.
	Threads int
	// AttentionGroups is how many groups Queries splits each head's
	// queries into, so that the device's flash attention takes the path
	// it has for heads that share keys. 0 picks the
	// device's default: DefaultCUDAAttentionGroups on CUDA, 1 (whole
	// heads) on the CPU, whose kernel has no such path.
	AttentionGroups int
	// GraphsFor writes graphs as for that device's kernels (DeviceCUDA)
	// whatever device computes them: tests check the arithmetic of CUDA's
	// graphs on the CPU. Empty: the device's own.
	GraphsFor string
	// BLAS says whether the CPU's matrix products go through ggml's BLAS
	// backend (blas.go): BLASAuto (when empty), BLASOn or BLASOff.
	BLAS string
	// BLASKernels names the OpenBLAS kernels to run (OPENBLAS_CORETYPE);
	// empty: those OpenBLAS picks for the CPU.
	BLASKernels string
	Log         *slog.Logger
}

// Device is the device a backend computes on.
type Device struct {
	Kind string // "cpu" or "cuda"
	Name string // the GPU's description; empty for the CPU
	// FreeBytes is the GPU memory free when the backend opened (0 on the
	// CPU, where the caller reads the system's).
	FreeBytes uint64
	// ComputeCapability is a CUDA GPU's, major·10 + minor (90: Hopper); 0
	// on the CPU or where the driver does not say.
	ComputeCapability int
	// BLAS names the library and kernels that compute the CPU's matrix
	// products ("OpenBLAS Cooperlake"); empty: ggml's own.
	BLAS string
	// NativeBFloat16 says the device's kernels multiply bfloat16 values
	// natively, summing in float32: a CUDA GPU from Ampere on (compute
	// capability 8.0), or a CPU whose ggml kernels were built for
	// AVX512_BF16's dot products (ggml's CPU feature list says so).
	NativeBFloat16 bool
}

// ggml's device types (enum ggml_backend_dev_type).
const (
	devCPU = 0
	devGPU = 1
)

// Open starts a backend on the device o asks for, from the engine's
// libraries: a CUDA build of them finds its GPUs, a CPU build none.
func Open(o Options) (*Backend, error) {
	a, libDir, err := load(o.LibDir, o.Log)
	if err != nil {
		return nil, err
	}
	want := o.Device
	if want == "" {
		want = DeviceAuto
	}
	if want != DeviceAuto && want != DeviceCPU && want != DeviceCUDA {
		return nil, fmt.Errorf("ggml: device %q: want auto, cpu or cuda", want)
	}
	switch o.BLAS {
	case "", BLASAuto, BLASOn, BLASOff:
	default:
		return nil, fmt.Errorf("ggml: BLAS %q: want auto, on or off", o.BLAS)
	}
	dev, device := unsafe.Pointer(nil), Device{Kind: DeviceCPU}
	if want != DeviceCPU {
		for i := range a.devCount() {
			d := a.devGet(i)
			if a.devType(d) != devGPU || !strings.HasPrefix(strings.ToUpper(a.devName(d)), "CUDA") {
				continue
			}
			var free, total uintptr
			a.devMemory(d, &free, &total)
			cc := computeCapability(a.devName(d))
			dev, device = d, Device{Kind: DeviceCUDA, Name: a.devDescription(d), FreeBytes: uint64(free),
				ComputeCapability: cc, NativeBFloat16: cc >= 80}
			break
		}
		if dev == nil && want == DeviceCUDA {
			return nil, errors.New("ggml: device cuda: the engine found no CUDA GPU (is it built with CUDA?)")
		}
	}
	if dev == nil {
		if dev = a.devByType(devCPU); dev == nil {
			return nil, errors.New("ggml: no CPU device")
		}
		device.NativeBFloat16 = a.features(a.devBackendReg(dev))["AVX512_BF16"] == "1"
	}
	b := a.devInit(dev, nil)
	if b == nil {
		return nil, fmt.Errorf("ggml: the %s backend did not start", device.Kind)
	}
	if p := a.regProcAddress(a.devBackendReg(dev), "ggml_backend_set_n_threads"); p != 0 && o.Threads > 0 && device.Kind == DeviceCPU {
		var setThreads func(b unsafe.Pointer, n int32)
		purego.RegisterFunc(&setThreads, p)
		setThreads(b, int32(o.Threads))
	}
	forCUDA := cmp.Or(o.GraphsFor, device.Kind) == DeviceCUDA
	groups := o.AttentionGroups
	if groups <= 0 {
		groups = 1
		if forCUDA {
			groups = DefaultCUDAAttentionGroups
		}
	}
	be := &Backend{a: a, b: b, device: device, groups: groups, forCUDA: forCUDA}
	if device.Kind != DeviceCPU || o.BLAS == BLASOff {
		return be, nil
	}
	bl, err := openBLAS(libDir, o.Threads, o.BLASKernels)
	switch {
	case err == nil:
		be.blas, be.device.BLAS = bl, "OpenBLAS "+bl.kernels
	case o.BLAS == BLASOn:
		a.backendFree(b)
		return nil, err
	case !errors.Is(err, errNoBLAS) && o.Log != nil:
		o.Log.Warn("matrix products on ggml's own kernels", "err", err)
	}
	return be, nil
}

// Device is where the backend computes.
func (be *Backend) Device() Device { return be.device }

// FastBFloat16 says whether products with bfloat16 matrices are the
// faster choice (Layout.BFloat16), where the device multiplies bfloat16
// natively (Device.NativeBFloat16). CUDA GPUs from Ampere on multiply it
// at float16's rate, and ggml-cuda then sums in float32 and writes
// float32, not a float16 result it converts in a pass of its own. A CPU
// with AVX512_BF16 multiplies it at twice float32's rate, with nothing to
// convert in its registers as float16 has (llamafile's tinyBLAS). Either
// way the values are rounded to bfloat16's 8 bits of mantissa; the sums
// stay float32.
func (be *Backend) FastBFloat16() bool { return be.device.NativeBFloat16 }

// DropBLAS closes the BLAS backend beside the CPU's, if there is one:
// every product then runs on ggml's own kernels, and Device.BLAS is
// empty. Call it before any graph is built.
func (be *Backend) DropBLAS() {
	if be.blas != nil {
		be.a.backendFree(be.blas.backend)
		be.blas, be.device.BLAS = nil, ""
	}
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
	if be.blas != nil {
		be.a.backendFree(be.blas.backend)
		be.blas = nil
	}
}

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
	// would otherwise convert such a matrix to float32 at every product:
	// 7% of the mid transformer's step, for twice the memory (ONNX
	// Runtime's CPU export holds them as float32 too). nil keeps every
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
