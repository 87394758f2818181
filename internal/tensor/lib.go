// Package tensor builds and computes graphs of tensor operations on
// llama.cpp's ggml, the one the text engine loads (internal/llamacpp): the
// image engine's models are written on it. It binds the part of ggml's C
// API that those graphs need (ggml.h, ggml-alloc.h, ggml-backend.h) with
// purego, and ggml_init, which takes a struct by value, with libffi.
package tensor

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/jupiterrider/ffi"
	"golang.org/x/sys/unix"

	"github.com/genq/genq/internal/llamacpp"
)

// api is ggml's functions, bound once per process.
type api struct {
	initFFI ffi.Cif
	initFn  uintptr

	free              func(ctx unsafe.Pointer)
	newTensor4d       func(ctx unsafe.Pointer, typ int32, ne0, ne1, ne2, ne3 int64) unsafe.Pointer
	setInput          func(t unsafe.Pointer)
	setOutput         func(t unsafe.Pointer)
	nbytes            func(t unsafe.Pointer) uintptr
	tensorOverhead    func() uintptr
	graphOverhead     func(size uintptr, grads bool) uintptr
	newGraphCustom    func(ctx unsafe.Pointer, size uintptr, grads bool) unsafe.Pointer
	buildForward      func(g, t unsafe.Pointer)
	add               func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	mul               func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	mulMat            func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	outProd           func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	scale             func(ctx, a unsafe.Pointer, s float32) unsafe.Pointer
	norm              func(ctx, a unsafe.Pointer, eps float32) unsafe.Pointer
	silu              func(ctx, a unsafe.Pointer) unsafe.Pointer
	softMax           func(ctx, a unsafe.Pointer) unsafe.Pointer
	cont              func(ctx, a unsafe.Pointer) unsafe.Pointer
	reshape4d         func(ctx, a unsafe.Pointer, ne0, ne1, ne2, ne3 int64) unsafe.Pointer
	permute           func(ctx, a unsafe.Pointer, a0, a1, a2, a3 int32) unsafe.Pointer
	conv2d            func(ctx, a, b unsafe.Pointer, s0, s1, p0, p1, d0, d1 int32) unsafe.Pointer
	interpolate       func(ctx, a unsafe.Pointer, ne0, ne1, ne2, ne3 int64, mode uint32) unsafe.Pointer
	devByType         func(typ int32) unsafe.Pointer
	devInit           func(dev unsafe.Pointer, params unsafe.Pointer) unsafe.Pointer
	devBackendReg     func(dev unsafe.Pointer) unsafe.Pointer
	regProcAddress    func(reg unsafe.Pointer, name string) uintptr
	backendFree       func(b unsafe.Pointer)
	allocCtxTensors   func(ctx, backend unsafe.Pointer) unsafe.Pointer
	bufferFree        func(buf unsafe.Pointer)
	tensorSet         func(t unsafe.Pointer, data unsafe.Pointer, offset, size uintptr)
	tensorGet         func(t unsafe.Pointer, data unsafe.Pointer, offset, size uintptr)
	defaultBufferType func(backend unsafe.Pointer) unsafe.Pointer
	gallocrNew        func(buft unsafe.Pointer) unsafe.Pointer
	gallocrAllocGraph func(galloc, graph unsafe.Pointer) bool
	gallocrFree       func(galloc unsafe.Pointer)
	graphCompute      func(backend, graph unsafe.Pointer) int32
	devCount          func() uintptr
	devGet            func(i uintptr) unsafe.Pointer
	devType           func(dev unsafe.Pointer) int32
	devName           func(dev unsafe.Pointer) string
	devDescription    func(dev unsafe.Pointer) string
	devMemory         func(dev unsafe.Pointer, free, total *uintptr)

	view4d       func(ctx, a unsafe.Pointer, ne0, ne1, ne2, ne3 int64, nb1, nb2, nb3, offset uintptr) unsafe.Pointer
	concat       func(ctx, a, b unsafe.Pointer, dim int32) unsafe.Pointer
	fill         func(ctx, a unsafe.Pointer, c float32) unsafe.Pointer
	accIn        func(ctx, a, b unsafe.Pointer, nb1, nb2, nb3, offset uintptr) unsafe.Pointer
	sqr          func(ctx, a unsafe.Pointer) unsafe.Pointer
	sqrt         func(ctx, a unsafe.Pointer) unsafe.Pointer
	sub          func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	repeat4d     func(ctx, a unsafe.Pointer, ne0, ne1, ne2, ne3 int64) unsafe.Pointer
	div          func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	scaleBias    func(ctx, a unsafe.Pointer, s, b float32) unsafe.Pointer
	sigmoid      func(ctx, a unsafe.Pointer) unsafe.Pointer
	geluErf      func(ctx, a unsafe.Pointer) unsafe.Pointer
	gelu         func(ctx, a unsafe.Pointer) unsafe.Pointer
	rmsNorm      func(ctx, a unsafe.Pointer, eps float32) unsafe.Pointer
	getRows      func(ctx, a, b unsafe.Pointer) unsafe.Pointer
	softMaxEx    func(ctx, a, mask unsafe.Pointer, scale, maxBias float32) unsafe.Pointer
	cast         func(ctx, a unsafe.Pointer, typ int32) unsafe.Pointer
	supportsOp   func(backend, op unsafe.Pointer) bool
	graphNodes   func(g unsafe.Pointer) int32
	graphNode    func(g unsafe.Pointer, i int32) unsafe.Pointer
	graphAddNode func(g, t unsafe.Pointer)
	opDesc       func(t unsafe.Pointer) string
	flashAttn    func(ctx, q, k, v, mask unsafe.Pointer, scale, maxBias, softcap float32) unsafe.Pointer
}

var (
	bindOnce sync.Once
	bound    *api
	bindErr  error
)

// load binds ggml from the text engine's libraries in dir (LLAMA_LIB_DIR
// when empty), loading them first as the text engine does, and returns
// their directory.
func load(dir string, log *slog.Logger) (*api, string, error) {
	lib, err := llamacpp.Load(dir, log)
	if err != nil {
		return nil, "", err
	}
	bindOnce.Do(func() { bound, bindErr = bind(lib.Dir) })
	return bound, lib.Dir, bindErr
}

func bind(dir string) (*api, error) {
	open := func(name string) (uintptr, error) {
		h, err := purego.Dlopen(filepath.Join(dir, name), purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			return 0, fmt.Errorf("ggml: open %s: %w", name, err)
		}
		return h, nil
	}
	base, err := open("libggml-base.so")
	if err != nil {
		return nil, err
	}
	ggml, err := open("libggml.so")
	if err != nil {
		return nil, err
	}
	a := &api{}
	var missing error
	reg := func(h uintptr, fn any, name string) {
		if missing != nil {
			return
		}
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			missing = fmt.Errorf("ggml: %s is not in the engine's libraries: rebuild them (make engine)", name)
			return
		}
		purego.RegisterFunc(fn, sym)
	}
	reg(base, &a.free, "ggml_free")
	reg(base, &a.newTensor4d, "ggml_new_tensor_4d")
	reg(base, &a.setInput, "ggml_set_input")
	reg(base, &a.setOutput, "ggml_set_output")
	reg(base, &a.nbytes, "ggml_nbytes")
	reg(base, &a.tensorOverhead, "ggml_tensor_overhead")
	reg(base, &a.graphOverhead, "ggml_graph_overhead_custom")
	reg(base, &a.newGraphCustom, "ggml_new_graph_custom")
	reg(base, &a.buildForward, "ggml_build_forward_expand")
	reg(base, &a.add, "ggml_add")
	reg(base, &a.mul, "ggml_mul")
	reg(base, &a.mulMat, "ggml_mul_mat")
	reg(base, &a.outProd, "ggml_out_prod")
	reg(base, &a.scale, "ggml_scale")
	reg(base, &a.norm, "ggml_norm")
	reg(base, &a.silu, "ggml_silu")
	reg(base, &a.softMax, "ggml_soft_max")
	reg(base, &a.cont, "ggml_cont")
	reg(base, &a.reshape4d, "ggml_reshape_4d")
	reg(base, &a.permute, "ggml_permute")
	reg(base, &a.conv2d, "ggml_conv_2d")
	reg(base, &a.interpolate, "ggml_interpolate")
	reg(base, &a.tensorSet, "ggml_backend_tensor_set")
	reg(base, &a.tensorGet, "ggml_backend_tensor_get")
	reg(base, &a.bufferFree, "ggml_backend_buffer_free")
	reg(base, &a.backendFree, "ggml_backend_free")
	reg(base, &a.defaultBufferType, "ggml_backend_get_default_buffer_type")
	reg(base, &a.gallocrNew, "ggml_gallocr_new")
	reg(base, &a.gallocrAllocGraph, "ggml_gallocr_alloc_graph")
	reg(base, &a.gallocrFree, "ggml_gallocr_free")
	reg(base, &a.graphCompute, "ggml_backend_graph_compute")
	reg(base, &a.allocCtxTensors, "ggml_backend_alloc_ctx_tensors")
	reg(base, &a.devInit, "ggml_backend_dev_init")
	reg(base, &a.devBackendReg, "ggml_backend_dev_backend_reg")
	reg(base, &a.regProcAddress, "ggml_backend_reg_get_proc_address")
	reg(base, &a.view4d, "ggml_view_4d")
	reg(base, &a.concat, "ggml_concat")
	reg(base, &a.fill, "ggml_fill")
	reg(base, &a.accIn, "ggml_acc_inplace")
	reg(base, &a.sqr, "ggml_sqr")
	reg(base, &a.sqrt, "ggml_sqrt")
	reg(base, &a.sub, "ggml_sub")
	reg(base, &a.repeat4d, "ggml_repeat_4d")
	reg(base, &a.div, "ggml_div")
	reg(base, &a.scaleBias, "ggml_scale_bias")
	reg(base, &a.sigmoid, "ggml_sigmoid")
	reg(base, &a.geluErf, "ggml_gelu_erf")
	reg(base, &a.gelu, "ggml_gelu")
	reg(base, &a.rmsNorm, "ggml_rms_norm")
	reg(base, &a.getRows, "ggml_get_rows")
	reg(base, &a.softMaxEx, "ggml_soft_max_ext")
	reg(base, &a.flashAttn, "ggml_flash_attn_ext")
	reg(base, &a.cast, "ggml_cast")
	reg(base, &a.supportsOp, "ggml_backend_supports_op")
	reg(base, &a.graphNodes, "ggml_graph_n_nodes")
	reg(base, &a.graphNode, "ggml_graph_node")
	reg(base, &a.graphAddNode, "ggml_graph_add_node")
	reg(base, &a.opDesc, "ggml_op_desc")
	reg(base, &a.devName, "ggml_backend_dev_name")
	reg(base, &a.devDescription, "ggml_backend_dev_description")
	reg(base, &a.devMemory, "ggml_backend_dev_memory")
	reg(base, &a.devType, "ggml_backend_dev_type")
	reg(ggml, &a.devByType, "ggml_backend_dev_by_type")
	reg(ggml, &a.devCount, "ggml_backend_dev_count")
	reg(ggml, &a.devGet, "ggml_backend_dev_get")
	if missing != nil {
		return nil, missing
	}
	// ggml_init takes struct ggml_init_params by value: 24 bytes, passed in
	// memory on amd64, which purego cannot do and libffi can.
	fn, err := purego.Dlsym(base, "ggml_init")
	if err != nil {
		return nil, fmt.Errorf("ggml: ggml_init: %w", err)
	}
	a.initFn = fn
	if status := ffi.PrepCif(&a.initFFI, ffi.DefaultAbi, 1, &ffi.TypePointer, &initParamsType); status != ffi.OK {
		return nil, fmt.Errorf("ggml: prepare ggml_init's call: %v", status)
	}
	if err := a.checkLayout(); err != nil {
		return nil, err
	}
	return a, nil
}

// checkLayout builds two tensors and a product of them and reads them
// through header and node, the Go mirrors of struct ggml_tensor that
// genq reads with unsafe: libraries of another release, whose struct
// differs, are refused here rather than read as nonsense later.
func (a *api) checkLayout() error {
	ctx := a.newContext(4 * a.tensorOverhead())
	if ctx == nil {
		return fmt.Errorf("ggml: ggml_init failed")
	}
	defer a.free(ctx)
	x := a.newTensor4d(ctx, typeF32, 2, 3, 5, 7)
	y := a.newTensor4d(ctx, typeF32, 2, 4, 5, 7)
	h := (*header)(x)
	wrong := func(what string, got, want any) error {
		return fmt.Errorf("ggml: genq reads struct ggml_tensor's %s as %v, want %v: the engine's libraries are of another release than the one genq is built for; rebuild them (make engine)", what, got, want)
	}
	switch {
	case h.typ != typeF32:
		return wrong("type", h.typ, typeF32)
	case h.ne != [4]int64{2, 3, 5, 7}:
		return wrong("ne", h.ne, [4]int64{2, 3, 5, 7})
	case h.nb != [4]uint64{4, 8, 24, 120}:
		return wrong("nb", h.nb, [4]uint64{4, 8, 24, 120})
	case a.nbytes(x) != 840:
		return wrong("size", a.nbytes(x), 840)
	}
	n := (*node)(a.mulMat(ctx, x, y))
	if n.ne != [4]int64{3, 4, 5, 7} || n.src[0] != x || n.src[1] != y || a.opDesc(unsafe.Pointer(n)) != "MUL_MAT" {
		return wrong("operation (ne, src)", fmt.Sprint(n.ne, n.src[:2]), fmt.Sprint([4]int64{3, 4, 5, 7}, []unsafe.Pointer{x, y}))
	}
	return nil
}

// initParams is struct ggml_init_params.
type initParams struct {
	memSize   uintptr
	memBuffer uintptr
	noAlloc   bool
}

var initParamsType = ffi.NewType(&ffi.TypePointer, &ffi.TypePointer, &ffi.TypeUint8)

// newContext is ggml_init for a context of metadata only (no_alloc): its
// tensors' data lives in backend buffers.
func (a *api) newContext(mem uintptr) unsafe.Pointer {
	p := initParams{memSize: mem, noAlloc: true}
	var ctx unsafe.Pointer
	ffi.Call(&a.initFFI, a.initFn, unsafe.Pointer(&ctx), unsafe.Pointer(&p))
	return ctx
}

// header is the start of struct ggml_tensor: its type, buffer, and shape.
type header struct {
	typ    int32
	_      int32
	buffer uintptr
	ne     [4]int64
	nb     [4]uint64
}

func shapeOf(t unsafe.Pointer) [4]int64 { return (*header)(t).ne }

// features is a backend registry's feature list (ggml_backend_get_features:
// {name, value} pairs, the last one empty), empty where it has none: the
// CPU's names the instruction sets its kernels were built for
// ("AVX512_BF16": "1").
func (a *api) features(reg unsafe.Pointer) map[string]string {
	out := map[string]string{}
	p := a.regProcAddress(reg, "ggml_backend_get_features")
	if p == 0 {
		return out
	}
	var get func(reg unsafe.Pointer) unsafe.Pointer
	purego.RegisterFunc(&get, p)
	type feature struct{ name, value *byte }
	for f := (*feature)(get(reg)); f != nil && f.name != nil; f = (*feature)(unsafe.Add(unsafe.Pointer(f), unsafe.Sizeof(feature{}))) {
		out[unix.BytePtrToString(f.name)] = unix.BytePtrToString(f.value)
	}
	return out
}
