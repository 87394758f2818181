package e2e

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// TestBothEnginesInOneProcess: this binary, like the worker's, runs the
// text engine (libllama) and the image engine on one ggml, the libraries
// of the one llama.cpp build: the test checks the process maps a single
// libggml-base, and runs both engines one after the other and then at
// once: a text job and an image job give the same answers every time.
func TestBothEnginesInOneProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	images, err := ggmlimage.Open(ctx, ggmlimage.Config{
		ModelDir: dir,
		Slots:    1,
		Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 64, Height: 64, Steps: 2, GuidanceScale: 7, MaxSize: 128, MaxSteps: 4, Threads: 1},
	}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { images.Close() })
	model := filepath.Join(t.TempDir(), tinygguf.FileName(genq.VariantB, "tiny"))
	if err := tinygguf.Write(model, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	text, err := textgen.Open(ctx, textgen.Config{ModelFile: model, Slots: 1, Threads: 1, MaxNewTokens: 32, IgnoreEOS: true}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { text.Close() })

	seed, zero := int64(3), 0.0
	imageJob := genq.Job{Envelope: genq.Envelope{ID: "img", Variant: genq.VariantC, Text: "a red fox"}, TextRequest: genq.TextRequest{Seed: &seed}}
	textJob := genq.Job{Envelope: genq.Envelope{ID: "txt", Variant: genq.VariantB, Text: "Tell me about queues."}, TextRequest: genq.TextRequest{Temperature: &zero}}
	run := func(b genq.Backend, job genq.Job) []byte {
		res, err := b.Generate(ctx, job, func(genq.Progress) {})
		if err != nil {
			t.Error(err)
			return nil
		}
		return res.Data
	}
	image, answer := run(images, imageJob), run(text, textJob)
	if cfg, err := png.DecodeConfig(bytes.NewReader(image)); err != nil || cfg.Width != 64 {
		t.Fatalf("image %+v, %v; want a 64-pixel PNG", cfg, err)
	}
	if len(answer) < 20 {
		t.Fatalf("text answer %q", answer)
	}
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
		ggml := map[string]bool{}
		for line := range strings.Lines(string(maps)) {
			if f := strings.Fields(line); len(f) == 6 && strings.Contains(filepath.Base(f[5]), "libggml-base.so") {
				ggml[f[5]] = true
			}
		}
		if len(ggml) != 1 {
			t.Errorf("the process maps %d libggml-base libraries, want the engine's one: %v", len(ggml), ggml)
		}
	}
	for round := range 3 {
		var wg sync.WaitGroup
		var image2, answer2 []byte
		wg.Go(func() { image2 = run(images, imageJob) })
		wg.Go(func() { answer2 = run(text, textJob) })
		wg.Wait()
		if !bytes.Equal(image2, image) {
			t.Errorf("round %d: the image beside a text job differs from the one alone", round)
		}
		if !bytes.Equal(answer2, answer) {
			t.Errorf("round %d: the text answer beside an image job is %s, alone %s", round, answer2, answer)
		}
	}
}
