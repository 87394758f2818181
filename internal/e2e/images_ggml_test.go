package e2e

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/onnx/tinyexport"
)

// TestImagesOnGGML serves variant C through a real worker running the ggml
// engine on the tiny faithful export: /generate answers a PNG of the
// configured size, a job's own size is honoured, and a bad one is a 400.
func TestImagesOnGGML(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{Images: httpapi.ImageLimits{MaxSize: 128, MaxSteps: 4, MaxN: 2}}})
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	b, err := ggmlimage.Open(context.Background(), ggmlimage.Config{ModelDir: dir, Device: ggmlimage.DeviceCPU, Slots: 2,
		Width: 64, Height: 64, Steps: 2, GuidanceScale: 7, MaxSize: 128, MaxSteps: 4, Threads: 1}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if e := b.Info().Device.Engine; e != "ggml" {
		t.Errorf("engine %q, want ggml", e)
	}
	s.startWorkerBackend(b)
	s.waitLive(1)

	r := s.postKey("/generate", "", `{"text":"a red cat"}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(r.body))
	if err != nil || cfg.Width != 64 || cfg.Height != 64 {
		t.Fatalf("image %+v, %v; want a 64x64 PNG", cfg, err)
	}
	images := pngs(t, s.postKey("/v1/images/generations", "", `{"prompt":"a dog","size":"96x64","n":2,"seed":5,"response_format":"b64_json"}`), 96, 64)
	if len(images) != 2 || bytes.Equal(images[0], images[1]) {
		t.Fatalf("n=2 gave %d images (identical: %v)", len(images), len(images) == 2 && bytes.Equal(images[0], images[1]))
	}
	if r := s.postKey("/v1/images/generations", "", `{"prompt":"a dog","size":"96x72"}`); r.status != http.StatusBadRequest {
		t.Errorf("a size off the 16-pixel grid: %d %s", r.status, r.body)
	}
}
