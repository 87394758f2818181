package tensor

import (
	"strconv"
	"strings"

	"github.com/ebitengine/purego"
)

// computeCapability is the CUDA device's compute capability as major·10 +
// minor (90 for Hopper), read from the driver that ggml-cuda has loaded
// already; 0 when it cannot be read. ggml's device API does not give it,
// and what runs fast depends on it (FastBFloat16). devName is ggml's name
// of the device, "CUDA" and its ordinal.
func computeCapability(devName string) int {
	ordinal, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(devName), "CUDA"))
	if err != nil {
		return 0
	}
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0
	}
	defer purego.Dlclose(h)
	var (
		cuInit               func(flags uint32) int32
		cuDeviceGet          func(dev *int32, ordinal int32) int32
		cuDeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	)
	for _, fn := range []struct {
		f    any
		name string
	}{{&cuInit, "cuInit"}, {&cuDeviceGet, "cuDeviceGet"}, {&cuDeviceGetAttribute, "cuDeviceGetAttribute"}} {
		sym, err := purego.Dlsym(h, fn.name)
		if err != nil {
			return 0
		}
		purego.RegisterFunc(fn.f, sym)
	}
	// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
	const major, minor = 75, 76
	var dev, hi, lo int32
	if cuInit(0) != 0 || cuDeviceGet(&dev, int32(ordinal)) != 0 ||
		cuDeviceGetAttribute(&hi, major, dev) != 0 || cuDeviceGetAttribute(&lo, minor, dev) != 0 {
		return 0
	}
	return int(hi)*10 + int(lo)
}
