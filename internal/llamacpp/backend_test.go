package llamacpp

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/procfs"
)

func TestBackendDevice(t *testing.T) {
	for _, tc := range []struct {
		name string
		gpu  *Device
		want genq.Device
	}{
		{"the CPU", nil, genq.Device{Kind: "cpu", Name: procfs.CPUName(), Engine: "llama.cpp"}},
		{"a GPU by its hardware", &Device{Name: "CUDA0", Description: "NVIDIA H200", GPU: true}, genq.Device{Kind: "cuda", Name: "NVIDIA H200", Engine: "llama.cpp"}},
		{"a GPU by ggml's name", &Device{Name: "CUDA0", GPU: true}, genq.Device{Kind: "cuda", Name: "CUDA0", Engine: "llama.cpp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BackendDevice(tc.gpu); got != tc.want {
				t.Fatalf("BackendDevice = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A start-up whose context ended while the libraries loaded stops there.
func TestLoadContextEnded(t *testing.T) {
	dir := engineDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadContext(ctx, dir, slog.New(slog.DiscardHandler)); !errors.Is(err, context.Canceled) {
		t.Fatalf("LoadContext: %v, want the context's error", err)
	}
	if lib, err := LoadContext(context.Background(), dir, slog.New(slog.DiscardHandler)); err != nil || lib == nil {
		t.Fatalf("LoadContext: %v, %v; want the library", lib, err)
	}
}
