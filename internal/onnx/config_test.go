package onnx

import (
	"io"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/envflag"
)

func TestRegisterFlags(t *testing.T) {
	env := map[string]string{
		"ONNXRUNTIME_LIB": "/opt/ort/libonnxruntime.so.1", "IMAGE_WIDTH": "768", "IMAGE_HEIGHT": "512",
		"IMAGE_STEPS": "20", "IMAGE_GUIDANCE_SCALE": "4.5", "IMAGE_SEED": "99", "IMAGE_THREADS": "3", "IMAGE_DEVICE": "cpu",
		"IMAGE_MAX_SIZE": "2048", "IMAGE_MAX_STEPS": "50",
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want Config
	}{
		{"defaults: variant C's parameters", nil, nil, Config{LibraryPath: DefaultLibraryPath, Pipeline: diffusion.Pipeline{Device: DeviceAuto, Width: 1024, Height: 1024, Steps: 28, GuidanceScale: 7, MaxSize: 1024, MaxSteps: 100}}},
		{"environment", env, nil, Config{LibraryPath: "/opt/ort/libonnxruntime.so.1", Pipeline: diffusion.Pipeline{Device: "cpu", Width: 768, Height: 512, Steps: 20, GuidanceScale: 4.5, Seed: 99, MaxSize: 2048, MaxSteps: 50, Threads: 3}}},
		{"flags win", env, []string{"--image-width", "256", "--image-seed", "0"}, Config{LibraryPath: "/opt/ort/libonnxruntime.so.1", Pipeline: diffusion.Pipeline{Device: "cpu", Width: 256, Height: 512, Steps: 20, GuidanceScale: 4.5, MaxSize: 2048, MaxSteps: 50, Threads: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := envflag.New("test", func(k string) string { return tt.env[k] }, io.Discard)
			// As the worker declares them: the pipeline's IMAGE_*
			// settings beside the engine's own.
			var got Config
			got.RegisterFlags(fs)
			got.Pipeline.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
