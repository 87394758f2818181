package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/jpeg"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/onnx/tinyexport"
)

// ortLibrary finds ONNX Runtime: ONNXRUNTIME_LIB, else the repository's
// lib/onnxruntime. Without it the test is skipped, unless GENQ_REQUIRE_ORT=1
// (make test), where a missing library is a failure.
func ortLibrary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ONNXRUNTIME_LIB"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", onnx.DefaultLibraryPath)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("GENQ_REQUIRE_ORT") == "1" {
		t.Fatalf("ONNX Runtime not found at %s and ONNXRUNTIME_LIB is unset", p)
	}
	t.Skipf("ONNX Runtime not found at %s (set ONNXRUNTIME_LIB)", p)
	return ""
}

// tinyImageWorker serves the tiny random-weight SD3 export through a real
// worker, at 64×64 and 2 steps by default, so an image takes milliseconds.
func (s *stack) tinyImageWorker(cfg onnx.Config) {
	s.t.Helper()
	cfg.LibraryPath, cfg.Device = ortLibrary(s.t), onnx.DeviceCPU
	cfg.ModelDir = s.t.TempDir()
	if err := tinyexport.Write(cfg.ModelDir, 1); err != nil {
		s.t.Fatal(err)
	}
	cfg.Slots, cfg.Threads = 2, 1
	b, err := onnx.Open(context.Background(), cfg, testLog(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { b.Close() }) // after the worker stops: cleanups run last first
	s.startWorkerBackend(b)
	s.waitLive(1)
}

type imagesResponse struct {
	Created int64 `json:"created"`
	Data    []struct {
		B64JSON string `json:"b64_json"`
	} `json:"data"`
	OutputFormat string `json:"output_format"`
}

// imageEvent is one server-sent event of a streamed image.
type imageEvent struct {
	Type         string `json:"type"`
	B64JSON      string `json:"b64_json"`
	Size         string `json:"size"`
	OutputFormat string `json:"output_format"`
	Index        *int   `json:"partial_image_index"`
}

// imageEvents reads a streamed image answer's events, each named as its
// type says.
func imageEvents(t *testing.T, r response) []imageEvent {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var events []imageEvent
	for _, block := range strings.Split(strings.TrimSpace(string(r.body)), "\n\n") {
		name, data, _ := strings.Cut(block, "\n")
		var e imageEvent
		if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &e); err != nil || "event: "+e.Type != name {
			t.Fatalf("event %q: %v", block, err)
		}
		events = append(events, e)
	}
	return events
}

// pngs decodes every image of an answer and checks its size.
func pngs(t *testing.T, r response, w, h int) [][]byte {
	t.Helper()
	out := decodeAs[imagesResponse](t, r)
	if r.status != http.StatusOK || out.Created < 1e9 || len(out.Data) == 0 {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	var images [][]byte
	for _, d := range out.Data {
		images = append(images, decodePNG(t, d.B64JSON, w, h))
	}
	return images
}

// decodePNG decodes a base64 PNG and checks its size.
func decodePNG(t *testing.T, b64 string, w, h int) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width != w || cfg.Height != h {
		t.Fatalf("image: %+v, %v; want a %dx%d PNG", cfg, err, w, h)
	}
	return raw
}

func TestOpenAIImages(t *testing.T) {
	const key = "sk-test"
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{APIKeys: []string{key},
		Images: httpapi.ImageLimits{MaxSize: 128, MaxSteps: 4, MaxN: 2}}})
	s.tinyImageWorker(onnx.Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})
	const path = "/v1/images/generations"

	t.Run("size, steps, guidance and seed", func(t *testing.T) {
		body := `{"prompt":"a cat","size":"96x64","response_format":"b64_json","num_inference_steps":3,"guidance_scale":3.5,"seed":7,"negative_prompt":"blurry"}`
		first := pngs(t, s.postKey(path, key, body), 96, 64)
		again := pngs(t, s.postKey(path, key, body), 96, 64)
		if len(first) != 1 || !bytes.Equal(first[0], again[0]) {
			t.Fatal("the same seed gave different images")
		}
		other := pngs(t, s.postKey(path, key, strings.Replace(body, `"seed":7`, `"seed":8`, 1)), 96, 64)
		if bytes.Equal(first[0], other[0]) {
			t.Fatal("another seed gave the same image")
		}
	})
	t.Run("defaults and n", func(t *testing.T) {
		images := pngs(t, s.postKey(path, key, `{"model":"sd3","prompt":"a dog","n":2,"seed":1}`), 64, 64)
		if len(images) != 2 || bytes.Equal(images[0], images[1]) {
			t.Fatalf("n=2 gave %d images (identical: %v)", len(images), len(images) == 2)
		}
	})
	t.Run("streamed, with partial images", func(t *testing.T) {
		events := imageEvents(t, s.postKey(path, key, `{"prompt":"a cat","size":"96x64","seed":7,"num_inference_steps":3,"stream":true,"partial_images":2}`))
		if len(events) != 3 || events[0].Index == nil || *events[0].Index != 0 || events[1].Index == nil || *events[1].Index != 1 ||
			events[2].Type != "image_generation.completed" || events[2].Index != nil {
			t.Fatalf("events %+v; want partial images 0 and 1, then the image", events)
		}
		for _, e := range events[:2] {
			raw, _ := base64.StdEncoding.DecodeString(e.B64JSON)
			if cfg, err := jpeg.DecodeConfig(bytes.NewReader(raw)); err != nil || cfg.Width != 96 || e.OutputFormat != "jpeg" || e.Size != "96x64" {
				t.Fatalf("partial image %v: %+v, %v (%s, %s)", *e.Index, cfg, err, e.OutputFormat, e.Size)
			}
		}
		final, _ := base64.StdEncoding.DecodeString(events[2].B64JSON)
		whole := pngs(t, s.postKey(path, key, `{"prompt":"a cat","size":"96x64","seed":7,"num_inference_steps":3}`), 96, 64)
		if !bytes.Equal(final, whole[0]) || events[2].OutputFormat != "png" {
			t.Fatal("the streamed image differs from the same request's whole answer")
		}
	})
	t.Run("jpeg", func(t *testing.T) {
		jpegOf := func(body string) ([]byte, string) {
			r := s.postKey(path, key, body)
			out := decodeAs[imagesResponse](t, r)
			if r.status != http.StatusOK || len(out.Data) != 1 {
				t.Fatalf("%d %.300s", r.status, r.body)
			}
			raw, err := base64.StdEncoding.DecodeString(out.Data[0].B64JSON)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := jpeg.DecodeConfig(bytes.NewReader(raw))
			if err != nil || cfg.Width != 96 || cfg.Height != 64 {
				t.Fatalf("image: %+v, %v; want a 96x64 JPEG", cfg, err)
			}
			return raw, out.OutputFormat
		}
		best, format := jpegOf(`{"prompt":"a cat","size":"96x64","seed":7,"output_format":"jpeg"}`)
		small, _ := jpegOf(`{"prompt":"a cat","size":"96x64","seed":7,"output_format":"jpeg","output_compression":10}`)
		if format != "jpeg" || len(small) >= len(best) {
			t.Fatalf("output_format %q; quality 10 gave %d bytes, the default %d", format, len(small), len(best))
		}
	})
	t.Run("asynchronous", func(t *testing.T) {
		r := s.postKey("/v1/jobs", key, `{"type":"image","request":{"prompt":"a cat","size":"64x96","seed":3}}`)
		if r.status != http.StatusAccepted {
			t.Fatalf("%d %s", r.status, r.body)
		}
		id := decodeAs[jobStatus](t, r).ID
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			req, _ := http.NewRequest(http.MethodGet, s.api.URL+"/v1/jobs/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Status string          `json:"status"`
				Result json.RawMessage `json:"result"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil || st.Status == "queued" || st.Status == "running" {
				continue // not done yet: a running job has no result
			}
			pngs(t, response{status: 200, body: st.Result}, 64, 96)
			return
		}
		t.Fatal("the image job never finished")
	})
	for _, tt := range []struct{ name, body, message string }{
		{"size not a multiple of 16", `{"prompt":"x","size":"100x64"}`, "multiples of 16"},
		{"size over the limit", `{"prompt":"x","size":"1024x1024"}`, "from 64 to 128"},
		{"size malformed", `{"prompt":"x","size":"big"}`, "WIDTHxHEIGHT"},
		{"steps over the limit", `{"prompt":"x","num_inference_steps":5}`, "between 1 and 4"},
		{"steps zero", `{"prompt":"x","num_inference_steps":0}`, "between 1 and 4"},
		{"guidance out of range", `{"prompt":"x","guidance_scale":-1}`, "guidance_scale must be between 0 and 30"},
		{"n over the limit", `{"prompt":"x","n":3}`, "n must be between 1 and 2"},
		{"url format", `{"prompt":"x","response_format":"url"}`, "response_format url is not supported"},
		{"webp", `{"prompt":"x","output_format":"webp"}`, "output_format webp is not supported"},
		{"stream of two", `{"prompt":"x","stream":true,"n":2}`, "stream makes one image"},
		{"partial images", `{"prompt":"x","stream":true,"partial_images":4}`, "partial_images must be between 0 and 3"},
		{"format unknown", `{"prompt":"x","output_format":"gif"}`, "output_format must be png or jpeg"},
		{"compression of a png", `{"prompt":"x","output_compression":50}`, "output_compression applies to jpeg only"},
		{"compression out of range", `{"prompt":"x","output_format":"jpeg","output_compression":101}`, "output_compression must be between 0 and 100"},
		{"no prompt", `{"size":"64x64"}`, "prompt is required"},
		{"text route", `{"messages":[{"role":"user","content":"x"}]}`, "makes images"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := path
			if tt.name == "text route" {
				p = "/v1/chat/completions"
			}
			r := s.postKey(p, key, tt.body)
			e := decodeAs[v1Err](t, r)
			if r.status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.message) {
				t.Fatalf("%d %s; want 400 with %q", r.status, r.body, tt.message)
			}
		})
	}
}

func TestOpenAIImagesOnTextVariant(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantB})
	r := s.postKey("/v1/images/generations", "", `{"prompt":"a cat"}`)
	if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, "needs the image variant") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// TestImageLimitsFromTheWorker: an api whose own image bounds are wider
// than its worker's refuses at once, from the worker's heartbeat, an image
// the worker could not make, and queues nothing.
func TestImageLimitsFromTheWorker(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{Images: httpapi.ImageLimits{MaxSize: 1024, MaxSteps: 50, MaxN: 2}}})
	s.tinyImageWorker(onnx.Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Steps: 2, MaxSize: 128, MaxSteps: 4}})
	for _, tt := range []struct{ body, want string }{
		{`{"prompt":"a cat","size":"256x256"}`, "width and height must be multiples of 16 from 64 to 128"},
		{`{"prompt":"a cat","num_inference_steps":5}`, "num_inference_steps must be between 1 and 4, not 5"},
	} {
		before := s.jobsPublished()
		r := s.postKey("/v1/images/generations", "", tt.body)
		if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, tt.want) {
			t.Fatalf("%s: %d %s; want 400 with %q", tt.body, r.status, r.body, tt.want)
		}
		if after := s.jobsPublished(); after != before {
			t.Fatalf("%s: a refused image was queued", tt.body)
		}
	}
	pngs(t, s.postKey("/v1/images/generations", "", `{"prompt":"a cat","size":"128x64","num_inference_steps":4}`), 128, 64)
}

// endings is a real image backend that reports how each streamed job's
// run ended.
type endings struct {
	*onnx.Backend
	ended chan error
}

func (b endings) GenerateImageStream(ctx context.Context, job genq.Job, progress func(genq.Progress), emit func(genq.ImagePiece)) (genq.Result, error) {
	res, err := b.Backend.GenerateImageStream(ctx, job, progress, emit)
	b.ended <- err
	return res, err
}

// TestStreamedImageClientLeaves: a client that goes away after the first
// preview of a long image cancels the job: its run ends at once, with the
// context's error, and its slot takes the next image.
func TestStreamedImageClientLeaves(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantC, http: httpapi.Config{Images: httpapi.ImageLimits{MaxSize: 1024, MaxSteps: 200, MaxN: 1}}})
	cfg := onnx.Config{
		LibraryPath: ortLibrary(t),
		ModelDir:    t.TempDir(),
		Slots:       1,
		Pipeline:    diffusion.Pipeline{Device: onnx.DeviceCPU, Threads: 1, Width: 64, Height: 64, Steps: 2, MaxSize: 1024, MaxSteps: 200},
	}
	if err := tinyexport.Write(cfg.ModelDir, 1); err != nil {
		t.Fatal(err)
	}
	b, err := onnx.Open(context.Background(), cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e := endings{Backend: b, ended: make(chan error, 4)}
	s.startWorkerBackend(e)
	s.waitLive(1)

	// 200 steps at 1024²: seconds of work, the first preview after 50.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api.URL+"/v1/images/generations",
		strings.NewReader(`{"prompt":"a long one","size":"1024x1024","num_inference_steps":200,"stream":true,"partial_images":3}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: image_generation.partial_image\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	left := time.Now()
	resp.Body.Close() // the client goes away
	select {
	case err := <-e.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the run ended with %v, want the context's cancellation", err)
		}
		t.Logf("the run stopped %v after the client left", time.Since(left).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the run went on after its client left")
	}
	// The one slot is free: the next image streams to its end.
	events := imageEvents(t, s.postKey("/v1/images/generations", "", `{"prompt":"next","stream":true,"partial_images":1}`))
	if len(events) != 2 || events[1].Type != "image_generation.completed" {
		t.Fatalf("the next image: %+v", events)
	}
}
