package onnx

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/onnx/tinyexport"
)

// UNet exports (SD 1.5, SDXL) are found from model_index.json and run with
// their own text encoders, denoiser inputs and the Euler scheduler.
func TestGenerateUNetExports(t *testing.T) {
	for _, p := range []tinyexport.Pipeline{tinyexport.SD15, tinyexport.SDXL} {
		t.Run(string(p), func(t *testing.T) {
			dir := t.TempDir()
			if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Pipeline: p}); err != nil {
				t.Fatal(err)
			}
			b := openTiny(t, Config{ModelDir: dir, Pipeline: diffusion.Pipeline{Width: 48, Height: 32, Seed: 4, Steps: 5}})
			if got := b.kind.name; got != string(p) {
				t.Fatalf("pipeline %q, want %q", got, p)
			}
			first := generate(t, b, "a photo of a cat")
			cfg, err := png.DecodeConfig(bytes.NewReader(first))
			if err != nil || cfg.Width != 48 || cfg.Height != 32 {
				t.Fatalf("DecodeConfig = %+v, %v; want 48x32", cfg, err)
			}
			if !bytes.Equal(first, generate(t, b, "a photo of a cat")) {
				t.Error("a fixed seed gave different images")
			}
			if bytes.Equal(first, generate(t, b, "a red horse")) {
				t.Error("different prompts gave the same image")
			}
		})
	}
}
