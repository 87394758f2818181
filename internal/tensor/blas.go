package tensor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BLAS choices for Options.BLAS.
const (
	BLASAuto = "auto" // where the engine has the BLAS module
	BLASOn   = "on"   // the BLAS module or an error
	BLASOff  = "off"  // ggml's CPU kernels alone
)

// blas is ggml's BLAS backend (ggml-blas), which computes a graph's matrix
// products with OpenBLAS's sgemm, beside the CPU backend that computes
// the rest. On the CPU the products are most of an image's time.
// OpenBLAS's kernels pack their operands into cache-sized blocks and run
// them faster than ggml's own (llamafile's tinyBLAS), which streams them
// from the cache with every block of results; and attention as two
// products with the softmax between takes less time than ggml's flash
// attention (docs/image.md has the figures).
//
// The engine's build makes it as a module of its own in blasDir under
// the libraries' directory, where ggml_backend_load_all (which the text
// engine calls on the directory) does not look, and it is opened here
// without entering ggml's registry: llama.cpp adds every registered
// accelerator to each text context, and would then send its products on
// quantized and bfloat16 weights through sgemm, converting the weights
// to float32 at every batch.
type blas struct {
	backend unsafe.Pointer
	kernels string // OpenBLAS's name for the kernels it runs
}

// blasDir is where under the engine's libraries the BLAS module is.
const blasDir = "blas"

// blasModule is the module's file name.
const blasModule = "libggml-blas.so"

// errNoBLAS says the engine's build has no BLAS module.
var errNoBLAS = errors.New("ggml: the engine has no BLAS module (scripts/build-llama.sh builds it where OpenBLAS is installed)")

// blasLib is the BLAS module's functions, opened once per process:
// OpenBLAS picks its kernels once, as it loads, so the first backend to
// open the module decides them for every later one.
type blasLib struct {
	init       func() unsafe.Pointer
	setThreads func(b unsafe.Pointer, n int32)
	kernels    string
}

var (
	blasOnce  sync.Once
	blasBound *blasLib
	blasErr   error
)

// openBLAS starts ggml's BLAS backend from the module beside the
// engine's libraries in dir, with threads threads (0: the backend's
// default), OpenBLAS running the kernels named kernels (empty: those it
// picks for this CPU) when this is the process's first.
func openBLAS(dir string, threads int, kernels string) (*blas, error) {
	blasOnce.Do(func() { blasBound, blasErr = bindBLAS(dir, kernels) })
	if blasErr != nil {
		return nil, blasErr
	}
	b := &blas{backend: blasBound.init(), kernels: blasBound.kernels}
	if b.backend == nil {
		return nil, errors.New("ggml: the BLAS backend did not start")
	}
	if threads > 0 {
		blasBound.setThreads(b.backend, int32(threads))
	}
	return b, nil
}

func bindBLAS(dir, kernels string) (*blasLib, error) {
	path := filepath.Join(dir, blasDir, blasModule)
	if _, err := os.Stat(path); err != nil {
		return nil, errNoBLAS
	}
	chooseKernels(kernels)
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("ggml: open %s: %w", path, err)
	}
	l := &blasLib{}
	var corename func() string
	for name, fn := range map[string]any{"ggml_backend_blas_init": &l.init, "ggml_backend_blas_set_n_threads": &l.setThreads,
		"openblas_get_corename": &corename} {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			return nil, fmt.Errorf("ggml: %s has no %s: rebuild the engine (make engine)", path, name)
		}
		purego.RegisterFunc(fn, sym)
	}
	l.kernels = corename()
	return l, nil
}

// chooseKernels sets OPENBLAS_CORETYPE, which OpenBLAS reads when it
// loads, to kernels, or clears it for OpenBLAS to pick by the CPU. An
// inherited value is not the image engine's: some machines set it for
// every program, for the same sums everywhere, and the one seen here
// (Haswell, on an AVX-512 CPU) halves sgemm's speed. It goes through the
// C library's environment, the one OpenBLAS reads, once, before anything
// in the process loads OpenBLAS.
func chooseKernels(kernels string) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return
	}
	if kernels == "" {
		if sym, err := purego.Dlsym(libc, "unsetenv"); err == nil {
			var unsetenv func(name string) int32
			purego.RegisterFunc(&unsetenv, sym)
			unsetenv("OPENBLAS_CORETYPE")
		}
		return
	}
	if sym, err := purego.Dlsym(libc, "setenv"); err == nil {
		var setenv func(name, value string, overwrite int32) int32
		purego.RegisterFunc(&setenv, sym)
		setenv("OPENBLAS_CORETYPE", kernels, 1)
	}
}

// run is a stretch of a graph's operations that one backend computes.
type run struct {
	backend unsafe.Pointer
	graph   unsafe.Pointer
}

// computeRuns computes g's operations in order, each stretch of them on
// the backend that computes it (backendFor). Both backends read and write
// the host memory the graph was laid out in, so nothing is copied between
// them. The stretches are made once per graph, for the computations that
// follow (SetInput).
func (g *Graph) computeRuns() error {
	a := g.be.a
	if g.runs == nil {
		n := int(a.graphNodes(g.g))
		backends := make([]unsafe.Pointer, n)
		for i := range n {
			backends[i] = g.be.backendFor(a.graphNode(g.g, int32(i)))
		}
		var starts []int
		for i := range n {
			if i == 0 || backends[i] != backends[i-1] {
				starts = append(starts, i)
			}
		}
		starts = append(starts, n)
		var mem uintptr
		for i := range len(starts) - 1 {
			mem += a.graphOverhead(uintptr(starts[i+1]-starts[i]), false) + a.tensorOverhead()
		}
		g.runsCtx = a.newContext(mem)
		for i := range len(starts) - 1 {
			lo, hi := starts[i], starts[i+1]
			r := run{backend: backends[lo], graph: a.newGraphCustom(g.runsCtx, uintptr(hi-lo), false)}
			for j := lo; j < hi; j++ {
				a.graphAddNode(r.graph, a.graphNode(g.g, int32(j)))
			}
			g.runs = append(g.runs, r)
		}
	}
	for _, r := range g.runs {
		if status := a.graphCompute(r.backend, r.graph); status != 0 {
			return fmt.Errorf("ggml: compute failed (status %d)", status)
		}
	}
	return nil
}

// blasMinSide is the shortest side of a product ggml's BLAS backend takes
// (ggml-blas.cpp's min_batch): smaller ones stay on the CPU's kernels.
const blasMinSide = 32

// backendFor is the backend that computes node t: the BLAS backend the
// matrix products it takes (float32 operands, or a matrix of a type it
// converts, each side at least blasMinSide long), else the backend's own.
// A bfloat16 matrix stays on the CPU's kernels where they multiply it
// natively (Device.NativeBFloat16): sgemm would take it widened to
// float32, converted at every product.
func (be *Backend) backendFor(t unsafe.Pointer) unsafe.Pointer {
	if be.blas == nil {
		return be.b
	}
	if m := (*node)(t).src[0]; m != nil && (*header)(m).typ == typeBF16 && be.device.NativeBFloat16 {
		return be.b
	}
	if op := be.a.opDesc(t); (op == "MUL_MAT" || op == "OUT_PROD") && be.a.supportsOp(be.blas.backend, t) {
		return be.blas.backend
	}
	return be.b
}
