package tensor

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
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
