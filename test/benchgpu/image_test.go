package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/genq/genq/internal/onnx/tinyexport"
)

// The image benchmark runs end to end on the CPU with the tiny model (on a
// GPU machine it runs the same code with --device cuda).
func TestImageBench(t *testing.T) {
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.json")
	var log bytes.Buffer
	err := run(context.Background(), []string{"image", "--dir", dir, "--size", "32", "--steps", "2", "--images", "2", "--device", "cpu", "--profile", "--out", out}, &log)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res ImageResults
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Size != 32 || res.Steps != 2 || res.Images != 2 || !res.T5 || res.SecondsPerImage <= 0 || res.SecondsPerStep <= 0 ||
		res.SecondsPerStep > res.SecondsPerImage {
		t.Errorf("results %+v", res)
	}
	// The profiled image names the transformer's products among its
	// operations, and its shares add up.
	var sum float64
	products := false
	for _, op := range res.Profile {
		sum += op.Time.Seconds()
		products = products || strings.HasPrefix(op.Op, "MUL_MAT ")
	}
	if !products || res.ProfiledSeconds <= 0 || sum < res.ProfiledSeconds*0.999 || sum > res.ProfiledSeconds*1.001 {
		t.Errorf("profile: %.3f s in %d operations (MUL_MAT among them: %v), profiled_seconds %.3f", sum, len(res.Profile), products, res.ProfiledSeconds)
	}
	if !strings.Contains(log.String(), "s/image") || !strings.Contains(log.String(), "operation by operation") {
		t.Errorf("output:\n%s", log.String())
	}
}
