package llamacpp

import (
	"github.com/hybridgroup/yzma/pkg/llama"
)

// Device is a compute device ggml found: the CPU, or a GPU whose backend
// is in the build.
type Device struct {
	dev llama.GGMLBackendDevice
	// gpu is its place among the GPUs, the order in which llama.cpp
	// numbers them for main_gpu; -1 for a device that is not a GPU.
	gpu         int
	Name        string // ggml's: "CPU", "CUDA0", …
	Description string // the hardware: "NVIDIA H100 80GB HBM3", the CPU's model
	GPU         bool
	Free, Total uint64 // memory in bytes
}

// Devices lists the devices the engine can compute on.
func (lib *Library) Devices() []Device {
	var out []Device
	gpus := 0
	for i := range llama.GGMLBackendDeviceCount() {
		d := llama.GGMLBackendDeviceGet(i)
		free, total := llama.GGMLBackendDeviceMemory(d)
		dev := Device{
			dev: d, gpu: -1, Name: llama.GGMLBackendDeviceName(d), Description: llama.GGMLBackendDeviceDescription(d),
			GPU: llama.GGMLBackendDevType(d) == llama.GGMLBackendDeviceTypeGPU, Free: free, Total: total,
		}
		if dev.GPU {
			dev.gpu = gpus
			gpus++
		}
		out = append(out, dev)
	}
	return out
}

// GPU is the first GPU in Devices, or nil when there is none.
func (lib *Library) GPU() *Device {
	for _, d := range lib.Devices() {
		if d.GPU {
			return &d
		}
	}
	return nil
}

// Memory is the device's free and total memory now.
func (d *Device) Memory() (free, total uint64) { return llama.GGMLBackendDeviceMemory(d.dev) }
