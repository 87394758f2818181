package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/sd3"
)

func TestModelsTinyImageEngines(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		e := env{getenv: func(string) string { return "" }, stdout: &out, stderr: &bytes.Buffer{}}
		err := runModels(context.Background(), append([]string{"tiny", "--variant", "C"}, args...), e)
		return out.String(), err
	}
	ggmlFiles := []string{sd3.ClipLFile, sd3.ClipGFile, sd3.T5File, sd3.TransformerFile, sd3.VAEDecoderFile}

	onnxDir := t.TempDir()
	if _, err := run("--dir", onnxDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(onnxDir, sd3.TransformerFile)); err == nil {
		t.Error("the default (onnx) wrote ggml files")
	}

	ggmlDir := t.TempDir()
	if _, err := run("--dir", ggmlDir, "--engine", "ggml", "--weights", "f32"); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(ggmlFiles, "transformer/model.onnx", "vae_decoder/model.onnx") {
		if _, err := os.Stat(filepath.Join(ggmlDir, f)); err != nil {
			t.Error(err)
		}
	}

	for _, bad := range [][]string{{"--engine", "tensorrt"}, {"--engine", "ggml", "--weights", "q4_0"}, {"--weights", "f16"}} {
		_, err := run(append([]string{"--dir", t.TempDir()}, bad...)...)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}
