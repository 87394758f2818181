package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub/hubtest"
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
	if _, err := run("--dir", onnxDir, "--engine", "onnx"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(onnxDir, sd3.TransformerFile)); err == nil {
		t.Error("--engine onnx wrote ggml files")
	}

	// The default (ggml) writes both engines' files, so either serves.
	for _, args := range [][]string{nil, {"--engine", "ggml", "--weights", "f32"}} {
		ggmlDir := t.TempDir()
		if _, err := run(append([]string{"--dir", ggmlDir}, args...)...); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(ggmlFiles, "transformer/model.onnx", "vae_decoder/model.onnx") {
			if _, err := os.Stat(filepath.Join(ggmlDir, f)); err != nil {
				t.Errorf("%v: %v", args, err)
			}
		}
	}

	for _, bad := range [][]string{{"--engine", "tensorrt"}, {"--engine", "ggml", "--weights", "q4_0"}, {"--engine", "onnx", "--weights", "f16"},
		{"--engine", "onnx", "--size", "medium"}, {"--size", "mid"}, {"--engine", "ggml", "--size", "medium", "--weights", "q4_0"}} {
		_, err := run(append([]string{"--dir", t.TempDir()}, bad...)...)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}

// download --engine ggml fetches the diffusers checkpoint of variant C and
// converts it once into the ggml engine's files.
func TestDownloadConvertsForGGML(t *testing.T) {
	src := t.TempDir()
	if err := sd3.WriteTinyDiffusers(src, nil); err != nil {
		t.Fatal(err)
	}
	var files []hubtest.File
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		files = append(files, hubtest.File{Path: filepath.ToSlash(rel), Data: data, LFS: filepath.Ext(rel) == ".safetensors"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	s.AddRepo(hubtest.Repo{ID: genq.VariantC.Spec().HubGGML.Repo, Files: files})
	dir := t.TempDir()
	vars := map[string]string{"HF_ENDPOINT": s.Hub.URL}
	code, out, errOut := runDownloadCLI(t, vars, "--variant", "C", "--engine", "ggml", "--dir", dir, "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{sd3.ClipLFile, sd3.ClipGFile, sd3.T5File, sd3.TransformerFile, sd3.VAEDecoderFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out, "converting transformer to GGUF") {
		t.Errorf("output:\n%s", out)
	}
	code, out, _ = runDownloadCLI(t, vars, "--variant", "C", "--engine", "ggml", "--dir", dir, "--progress", "none")
	if code != 0 || !strings.Contains(out, "already holds the ggml files") {
		t.Errorf("rerun: exit %d\n%s", code, out)
	}
	if code, _, errOut := runDownloadCLI(t, vars, "--variant", "B", "--engine", "ggml", "--dir", t.TempDir()); code == 0 {
		t.Errorf("--engine ggml for a text variant was accepted: %s", errOut)
	}
}
