package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"net/http"
	"sync"
	"testing"

	"github.com/genq/genq/internal/diffusion"
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
	b, err := ggmlimage.Open(context.Background(), ggmlimage.Config{
		ModelDir: dir,
		Slots:    2,
		Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 64, Height: 64, Steps: 2, GuidanceScale: 7, MaxSize: 128, MaxSteps: 4, Threads: 1},
	}, testLog(t))
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
	// Two streamed images at once, with previews: the previews' VAE runs
	// outside the step batcher, and each image is the one made whole.
	streamed := make([][]imageEvent, 2)
	var wg sync.WaitGroup
	for i := range streamed {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt":"a dog","size":"96x64","seed":%d,"num_inference_steps":3,"stream":true,"partial_images":2}`, 5+i)
			r, err := s.do(t.Context(), http.MethodPost, "/v1/images/generations", []byte(body))
			if err != nil {
				t.Error(err)
				return
			}
			streamed[i] = imageEvents(t, r)
		})
	}
	wg.Wait()
	for i, events := range streamed {
		if len(events) != 3 || events[0].Index == nil || events[1].Index == nil || events[2].Type != "image_generation.completed" {
			t.Fatalf("stream %d: %+v", i, events)
		}
		final, _ := base64.StdEncoding.DecodeString(events[2].B64JSON)
		whole := pngs(t, s.postKey("/v1/images/generations", "", fmt.Sprintf(`{"prompt":"a dog","size":"96x64","seed":%d,"num_inference_steps":3}`, 5+i)), 96, 64)
		if !bytes.Equal(final, whole[0]) {
			t.Fatalf("stream %d: the streamed image differs from the whole one", i)
		}
	}
	if r := s.postKey("/v1/images/generations", "", `{"prompt":"a dog","size":"96x72"}`); r.status != http.StatusBadRequest {
		t.Errorf("a size off the 16-pixel grid: %d %s", r.status, r.body)
	}
}
