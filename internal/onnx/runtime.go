package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

// envMu guards ONNX Runtime's environment, which onnxruntime_go keeps
// process-global: the first Open initialises it, later ones (tests, a
// second backend) reuse it. It is never destroyed, since another Backend
// may still use it.
var envMu sync.Mutex

func initRuntime(libPath string) error {
	envMu.Lock()
	defer envMu.Unlock()
	if ort.IsInitialized() {
		return nil
	}
	if _, err := os.Stat(libPath); err != nil {
		return fmt.Errorf("onnx runtime library: %w (fetch the CPU build with scripts/fetch-onnxruntime.sh lib/onnxruntime, or set ONNXRUNTIME_LIB)", err)
	}
	ort.SetSharedLibraryPath(libPath)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("onnx runtime %s: %w", libPath, err)
	}
	return nil
}

// newSessionOptions returns options for one model on the chosen device.
func newSessionOptions(cuda bool, threads int) (*ort.SessionOptions, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx runtime session options: %w", err)
	}
	if threads > 0 {
		if err := opts.SetIntraOpNumThreads(threads); err != nil {
			opts.Destroy()
			return nil, fmt.Errorf("onnx runtime threads: %w", err)
		}
	}
	if cuda {
		if err := appendCUDA(opts); err != nil {
			opts.Destroy()
			return nil, err
		}
	}
	return opts, nil
}

// appendCUDA adds the CUDA execution provider. It fails when the library
// is a CPU build (no libonnxruntime_providers_cuda.so beside it) or CUDA
// cannot start.
func appendCUDA(opts *ort.SessionOptions) error {
	cudaOpts, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return fmt.Errorf("cuda provider options: %w", err)
	}
	defer cudaOpts.Destroy()
	if err := cudaOpts.Update(map[string]string{"device_id": "0"}); err != nil {
		return fmt.Errorf("cuda provider options: %w", err)
	}
	if err := opts.AppendExecutionProviderCUDA(cudaOpts); err != nil {
		return fmt.Errorf("cuda execution provider: %w", err)
	}
	return nil
}

// chooseDevice decides between CUDA and the CPU: CUDA needs a GPU and a
// library that has the CUDA provider. With DeviceAuto a failed CUDA start
// falls back to the CPU; with DeviceCUDA it is an error.
func chooseDevice(want string, threads int) (genq.Device, error) {
	cpu := genq.Device{Kind: "cpu", Name: procfs.CPUName()}
	if want == DeviceCPU {
		return cpu, nil
	}
	gpu, hasGPU := gpuName()
	if !hasGPU {
		if want == DeviceCUDA {
			return genq.Device{}, errors.New("image device cuda: no NVIDIA GPU found")
		}
		return cpu, nil
	}
	opts, err := newSessionOptions(true, threads)
	if err != nil {
		if want == DeviceCUDA {
			return genq.Device{}, fmt.Errorf("image device cuda: %w", err)
		}
		return cpu, fmt.Errorf("%w: %w", errCUDAFallback, err)
	}
	opts.Destroy()
	return genq.Device{Kind: "cuda", Name: gpu}, nil
}

// errCUDAFallback marks a GPU that is present but unusable; Open logs it
// and runs on the CPU.
var errCUDAFallback = errors.New("a GPU is present but the CUDA provider cannot start, running on the CPU")

// gpuName reads the first NVIDIA GPU's model from the driver's proc files.
func gpuName() (string, bool) {
	infos, _ := filepath.Glob("/proc/driver/nvidia/gpus/*/information")
	for _, path := range infos {
		if name := procfs.Field(path, "Model"); name != "" {
			return name, true
		}
	}
	// Containers often get the device node without the driver's proc files.
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		return "NVIDIA GPU", true
	}
	return "", false
}
