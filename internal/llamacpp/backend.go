package llamacpp

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

// LoadContext is Load for a backend's start-up: when ctx ended while the
// libraries loaded, it returns ctx's error, so no model is opened for a
// process that is stopping.
func LoadContext(ctx context.Context, dir string, log *slog.Logger) (*Library, error) {
	lib, err := Load(dir, log)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return lib, nil
}

// BackendDevice is the device a backend reports it runs on: gpu, or the
// CPU when gpu is nil.
func BackendDevice(gpu *Device) genq.Device {
	if gpu == nil {
		return genq.Device{Kind: "cpu", Name: procfs.CPUName(), Engine: "llama.cpp"}
	}
	return genq.Device{Kind: "cuda", Name: cmp.Or(gpu.Description, gpu.Name), Engine: "llama.cpp"}
}
