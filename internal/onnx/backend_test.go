package onnx

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/draw"
	"image/png"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/onnx/tinyexport"
)

// tinyExport writes the tiny export once per test binary run.
var tinyExport = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "genq-tiny-sd3-")
	if err != nil {
		return "", err
	}
	return dir, tinyexport.Write(dir, 1)
})

func tinyDir(tb testing.TB) string {
	tb.Helper()
	dir, err := tinyExport()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func openTiny(tb testing.TB, cfg Config) *Backend {
	tb.Helper()
	cfg.LibraryPath = ortLibrary(tb)
	if cfg.ModelDir == "" {
		cfg.ModelDir = tinyDir(tb)
	}
	if cfg.Device == "" {
		cfg.Device = DeviceCPU
	}
	if cfg.Threads == 0 {
		cfg.Threads = 2
	}
	b, err := Open(context.Background(), cfg, testLogger(tb))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func generate(tb testing.TB, b *Backend, text string) []byte {
	tb.Helper()
	res, err := b.Generate(context.Background(), genq.Job{Envelope: genq.Envelope{ID: "test", Text: text}}, func(genq.Progress) {})
	if err != nil {
		tb.Fatalf("Generate(%q): %v", text, err)
	}
	if res.ContentType != "image/png" {
		tb.Fatalf("content type %q, want image/png", res.ContentType)
	}
	return res.Data
}

func TestGenerateTinyExport(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 48, Seed: 42, Steps: 4}})
	if info := b.Info(); info.Device.Kind != "cpu" || info.Slots != 1 || info.Model == "" {
		t.Errorf("Info() = %+v, want a cpu device, 1 slot and a model name", info)
	}

	steps := 0
	var last genq.Progress
	res, err := b.Generate(context.Background(), genq.Job{Envelope: genq.Envelope{Text: "a photo of a cat"}}, func(p genq.Progress) { steps, last = steps+1, p })
	if err != nil {
		t.Fatal(err)
	}
	if steps < 4 || last != (genq.Progress{Done: 4, Total: 4}) {
		t.Errorf("progress called %d times, last with %+v; want at least once per step, the last 4 of 4", steps, last)
	}
	img, err := png.Decode(bytes.NewReader(res.Data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got.X != 64 || got.Y != 48 {
		t.Errorf("image is %v, want 64x48", got)
	}

	again := generate(t, b, "a photo of a cat")
	if !bytes.Equal(res.Data, again) {
		t.Error("a fixed seed gave different images for the same prompt")
	}
	if other := generate(t, b, "a red dog riding a horse"); bytes.Equal(res.Data, other) {
		t.Error("different prompts gave the same image")
	}
}

func TestGenerateRandomSeedPerRequest(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 32, Height: 32, Steps: 2}})
	if bytes.Equal(generate(t, b, "a cat"), generate(t, b, "a cat")) {
		t.Error("seed 0 should draw a new seed per request, but two images are identical")
	}
}

func TestGenerateLargePNG(t *testing.T) {
	// Over 1 MB: more than NATS's default max_payload, so the result path
	// must chunk or use the object store. The tiny VAE makes noise.
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 768, Height: 768, Seed: 7, Steps: 2}})
	data := generate(t, b, "a blue astronaut")
	if len(data) <= 1<<20 {
		t.Fatalf("PNG is %d bytes, want over 1 MiB", len(data))
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != 768 || cfg.Height != 768 {
		t.Fatalf("DecodeConfig = %+v, %v; want 768x768", cfg, err)
	}
}

func TestGenerateStopsWhenCancelled(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Seed: 1, Steps: 1000}})
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	start := time.Now()
	_, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{Text: "a cat"}}, func(genq.Progress) {
		steps++
		if steps == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	if steps > 5 {
		t.Errorf("ran %d steps after being cancelled at step 3", steps-3)
	}
	t.Logf("stopped after %v", time.Since(start))
}

func TestGenerateStopsInsideAModelRun(t *testing.T) {
	// A large image makes the VAE decode long enough to cancel in the
	// middle of it: the run must stop well before the decode would end.
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 2048, Height: 1024, Seed: 1, Steps: 1}})
	start := time.Now()
	generate(t, b, "a cat")
	full := time.Since(start)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	var mu sync.Mutex
	calls := 0
	_, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{Text: "a cat"}}, func(genq.Progress) {
		if calls++; calls == 2 { // after the only step: the VAE runs next
			time.AfterFunc(10*time.Millisecond, func() {
				mu.Lock()
				cancelled = time.Now()
				mu.Unlock()
				cancel()
			})
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	mu.Lock()
	after := time.Since(cancelled)
	mu.Unlock()
	t.Logf("a whole image takes %v; stopped %v after the cancel: %v", full, after, err)
	if after > full/4 {
		t.Errorf("stopped %v after the cancel, want well under a whole image (%v)", after, full)
	}
}

func TestGenerateDeadlinePassed(t *testing.T) {
	// A context that is already over terminates the first model run: the
	// error must still wrap the context's, so the runtime knows why.
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 32, Height: 32, Steps: 2}})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := b.Generate(ctx, genq.Job{Envelope: genq.Envelope{Text: "a cat"}}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one wrapping context.DeadlineExceeded", err)
	}
}

func TestGenerateConcurrentSlots(t *testing.T) {
	b := openTiny(t, Config{Slots: 3, Pipeline: diffusion.Pipeline{Width: 32, Height: 32, Seed: 3, Steps: 2}})
	want := generate(t, b, "the moon")
	var wg sync.WaitGroup
	results := make([][]byte, 3)
	for i := range results {
		wg.Go(func() { results[i] = generate(t, b, "the moon") })
	}
	wg.Wait()
	for i, got := range results {
		if !bytes.Equal(got, want) {
			t.Errorf("concurrent call %d gave a different image than a lone call", i)
		}
	}
}

func TestGenerateRejectsEmptyText(t *testing.T) {
	b := openTiny(t, Config{Pipeline: diffusion.Pipeline{Width: 32, Height: 32, Steps: 1}})
	_, err := b.Generate(context.Background(), genq.Job{}, nil)
	if genq.ErrorCode(err) != genq.Invalid {
		t.Errorf("err = %v, want an invalid error", err)
	}
}

func TestOpenRejectsBrokenExports(t *testing.T) {
	lib := ortLibrary(t)
	tests := []struct {
		name    string
		breakIt func(t *testing.T, dir string)
		want    string
	}{
		{"missing transformer", func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "transformer", "model.onnx"))
		}, "transformer: missing"},
		{"missing tokenizer", func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "tokenizer_2", "merges.txt"))
		}, "tokenizer_2"},
		{"no model index", func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "model_index.json"))
		}, "model_index.json"},
		{"text encoders swapped", func(t *testing.T, dir string) {
			// T5 where CLIP-L belongs: no text_embeds, no hidden states.
			copyFile(t, filepath.Join(dir, "text_encoder_3", "model.onnx"), filepath.Join(dir, "text_encoder", "model.onnx"))
		}, "text_encoder"},
		{"vae in place of transformer", func(t *testing.T, dir string) {
			copyFile(t, filepath.Join(dir, "vae_decoder", "model.onnx"), filepath.Join(dir, "transformer", "model.onnx"))
		}, `no input "encoder_hidden_states"`},
		{"clip-g narrower than the transformer expects", func(t *testing.T, dir string) {
			copyFile(t, filepath.Join(dir, "text_encoder", "model.onnx"), filepath.Join(dir, "text_encoder_2", "model.onnx"))
		}, "pooled_projections"},
		{"wrong scheduler", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), `{"_class_name":"DDIMScheduler"}`)
		}, "DDIMScheduler"},
		{"unknown pipeline", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "model_index.json"), `{"_class_name":"FluxPipeline"}`)
		}, `"FluxPipeline" is not supported`},
		{"sd3 export labelled as sdxl", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "model_index.json"), `{"_class_name":"StableDiffusionXLPipeline"}`)
			write(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), `{"_class_name":"EulerDiscreteScheduler"}`)
		}, "unet: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tinyexport.Write(dir, 1); err != nil {
				t.Fatal(err)
			}
			tt.breakIt(t, dir)
			b, err := Open(context.Background(), Config{ModelDir: dir, LibraryPath: lib, Pipeline: diffusion.Pipeline{Device: DeviceCPU, Width: 32, Height: 32}}, nil)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded on a broken export")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestOpenWithoutPartConfigs(t *testing.T) {
	// config.json beside a model is optional: the VAE's scaling falls back
	// to SD3's, text_embeds' width (when the graph leaves it free) to the
	// hidden width.
	dir := t.TempDir()
	if err := tinyexport.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"text_encoder", "text_encoder_2", "vae_decoder"} {
		remove(t, filepath.Join(dir, part, "config.json"))
	}
	b := openTiny(t, Config{ModelDir: dir, Pipeline: diffusion.Pipeline{Width: 32, Height: 32, Steps: 2, Seed: 5}})
	if b.vae.Scaling != sd3ScalingFactor || b.vae.Shift != sd3ShiftFactor {
		t.Errorf("vae scaling %+v, want SD3's", b.vae)
	}
	generate(t, b, "a cat")
}

func TestOpenRejectsBadConfig(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{ModelDir: "x", Pipeline: diffusion.Pipeline{Width: 100, Height: 64}}, "multiples of 16"},
		{Config{ModelDir: "x", Pipeline: diffusion.Pipeline{Device: "tpu"}}, "auto, cpu or cuda"},
		{Config{ModelDir: "x", Pipeline: diffusion.Pipeline{Steps: -1}}, "steps"},
		{Config{}, "model directory"},
	}
	for _, tt := range tests {
		_, err := Open(context.Background(), tt.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%+v): err %v, want one saying %q", tt.cfg, err, tt.want)
		}
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b))
}

func TestGenerateReadsDtypesFromTheModels(t *testing.T) {
	// The same weights with fp32 inputs and outputs and int32 token ids: the
	// image must match the fp16 export's up to fp16 rounding, which proves
	// both the fp16 and the fp32 tensor paths.
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Float32: true, Int32IDs: true}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pipeline: diffusion.Pipeline{Width: 64, Height: 64, Seed: 11, Steps: 4}}
	fp16 := decodePNG(t, generate(t, openTiny(t, cfg), "a photo of the moon"))
	cfg.ModelDir = dir
	fp32 := decodePNG(t, generate(t, openTiny(t, cfg), "a photo of the moon"))

	var diff, n float64
	for i := range fp16.Pix {
		diff += math.Abs(float64(fp16.Pix[i]) - float64(fp32.Pix[i]))
		n++
	}
	mean := diff / n
	t.Logf("mean difference %.3f levels per channel", mean)
	if mean > 2 {
		t.Errorf("fp16 and fp32 exports differ by %.2f levels per channel on average, want under 2", mean)
	}
}

func decodePNG(t *testing.T, data []byte) *image.NRGBA {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := image.NewNRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}
