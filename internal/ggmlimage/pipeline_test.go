package ggmlimage_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// The size and steps of onnxReference's image.
const refWidth, refHeight, refSteps = 64, 48, 6

// onnxReference writes the tiny faithful export, ggml's files in weights,
// and makes one image of it on the ONNX pipeline, the reference the ggml
// pipeline is held to: the export's directory, the job (a negative prompt
// and a size that is not square), the latents after each step, the image.
func onnxReference(t *testing.T, weights sd3.DType) (dir string, job genq.Job, steps [][]float32, img genq.Result) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 11, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: weights}); err != nil {
		t.Fatal(err)
	}
	ref, err := onnx.Open(ctx, onnx.Config{ModelDir: dir, LibraryPath: ortLibrary(t), Pipeline: diffusion.Pipeline{Device: onnx.DeviceCPU, Width: refWidth, Height: refHeight, Steps: refSteps, Threads: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ref.ObserveSteps(func(_ int, x []float32) { steps = append(steps, slices.Clone(x)) })
	seed := int64(42)
	job = genq.Job{Envelope: genq.Envelope{ID: "j", Text: "a photo of a red cat on the moon"}, TextRequest: genq.TextRequest{Seed: &seed}, ImageRequest: genq.ImageRequest{NegativePrompt: "blue dog"}}
	if img, err = ref.Generate(ctx, job, nil); err != nil {
		t.Fatal(err)
	}
	return dir, job, steps, img
}

// The ggml pipeline against the ONNX one on the same tiny faithful export
// in F32: the latents after every step within 1e-3 of their largest value,
// and the final pixels within one level of 255. A negative prompt and a
// size that is not square go through both.
func TestPipelineMatchesONNX(t *testing.T) {
	ctx := context.Background()
	const w, h, steps = refWidth, refHeight, refSteps
	dir, job, want, refImg := onnxReference(t, sd3.F32)
	record := func(into *[][]float32) func(int, []float32) {
		return func(_ int, x []float32) { *into = append(*into, slices.Clone(x)) }
	}
	// The graphs as the CPU's kernels want them, and as CUDA's do (each
	// head's queries in groups, layouts made by adding zero), in 3 groups
	// and in CUDA's default number.
	for _, tc := range []struct {
		graphsFor string
		groups    int
	}{{"", 0}, {ggmlimage.DeviceCUDA, 3}, {ggmlimage.DeviceCUDA, 0}} {
		t.Run(fmt.Sprintf("graphs for %q, %d attention groups", tc.graphsFor, tc.groups), func(t *testing.T) {
			b, err := ggmlimage.Open(ctx, ggmlimage.Config{
				ModelDir:        dir,
				AttentionGroups: tc.groups,
				GraphsFor:       tc.graphsFor,
				Pipeline:        diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: w, Height: h, Steps: steps, GuidanceScale: 7, MaxSize: w, MaxSteps: steps, Threads: 2},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := b.Info(); got.Device.Kind != "cpu" || got.Limits.ImageMaxSize != w {
				t.Errorf("info %+v", got)
			}
			var got [][]float32
			b.ObserveSteps(record(&got))
			var progress int
			img, err := b.Generate(ctx, job, func(genq.Progress) { progress++ })
			if err != nil {
				t.Fatal(err)
			}
			if progress != steps+1 {
				t.Errorf("progress called %d times, want %d (the prompt, then each step)", progress, steps+1)
			}
			if len(got) != steps || len(want) != steps {
				t.Fatalf("%d and %d steps observed, want %d", len(got), len(want), steps)
			}
			for step := range steps {
				diff, scale := compare(t, got[step], want[step])
				t.Logf("step %d: largest difference %.3g, %.3g of the largest value %.3g", step, diff, diff/scale, scale)
				if diff > 1e-3*scale {
					t.Errorf("step %d: largest difference %.3g is over 1e-3 of the largest value %.3g", step, diff, scale)
				}
			}
			a, c := decode(t, refImg.Data), decode(t, img.Data)
			if a.Bounds() != c.Bounds() || a.Bounds().Dx() != w || a.Bounds().Dy() != h {
				t.Fatalf("sizes %v and %v, want %dx%d", a.Bounds(), c.Bounds(), w, h)
			}
			worst, differ := 0, 0
			for i := range a.Pix {
				d := int(a.Pix[i]) - int(c.Pix[i])
				d = max(d, -d)
				worst = max(worst, d)
				if d > 0 {
					differ++
				}
			}
			t.Logf("pixels: %d of %d values differ, by at most %d", differ, len(a.Pix), worst)
			if worst > 1 {
				t.Errorf("a pixel differs by %d levels", worst)
			}
		})
	}
}

// The ggml pipeline on float16 weights against the ONNX one, with
// IMAGE_BFLOAT16 off and on: on, the transformer's per-token matrices and
// the VAE's inner 3×3 kernels are bfloat16, their values rounded to 8
// bits, and the bounds are wider; both are logged.
func TestPipelineInBFloat16MatchesONNX(t *testing.T) {
	ctx := context.Background()
	const w, h, steps = refWidth, refHeight, refSteps
	dir, job, want, refImg := onnxReference(t, sd3.F16)
	for _, tc := range []struct {
		bfloat16   string
		stepTol    float64 // of the latents' largest value
		meanLevels float64
		worst      int
	}{{ggmlimage.BFloat16Off, 3e-3, 0.15, 1}, {ggmlimage.BFloat16On, 1e-2, 0.6, 6}} {
		t.Run(tc.bfloat16, func(t *testing.T) {
			b, err := ggmlimage.Open(ctx, ggmlimage.Config{
				ModelDir: dir,
				BFloat16: tc.bfloat16,
				Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: w, Height: h, Steps: steps, GuidanceScale: 7, MaxSize: w, MaxSteps: steps, Threads: 2},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.BFloat16() != (tc.bfloat16 == ggmlimage.BFloat16On) {
				t.Errorf("BFloat16() = %v", b.BFloat16())
			}
			var got [][]float32
			b.ObserveSteps(func(_ int, x []float32) { got = append(got, slices.Clone(x)) })
			img, err := b.Generate(ctx, job, nil)
			if err != nil {
				t.Fatal(err)
			}
			for step := range steps {
				diff, scale := compare(t, got[step], want[step])
				t.Logf("step %d: largest difference %.3g of the largest value", step, diff/scale)
				if diff > tc.stepTol*scale {
					t.Errorf("step %d: largest difference %.3g is over %g of the largest value %.3g", step, diff, tc.stepTol, scale)
				}
			}
			a, c := decode(t, refImg.Data), decode(t, img.Data)
			worst, sum := 0, 0
			for i := range a.Pix {
				d := int(a.Pix[i]) - int(c.Pix[i])
				d = max(d, -d)
				worst, sum = max(worst, d), sum+d
			}
			mean := float64(sum) / float64(len(a.Pix))
			t.Logf("pixels: %.3f levels apart on average, at most %d", mean, worst)
			if mean > tc.meanLevels || worst > tc.worst {
				t.Errorf("pixels %.3f levels apart on average, at most %d: want at most %g and %d", mean, worst, tc.meanLevels, tc.worst)
			}
		})
	}
}

func decode(t *testing.T, data []byte) *image.NRGBA {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := img.(*image.NRGBA)
	if !ok {
		b := img.Bounds()
		n = image.NewNRGBA(b)
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				n.Set(x, y, img.At(x, y))
			}
		}
	}
	return n
}

// Jobs the pipeline cannot serve are refused as invalid, as the ONNX
// engine refuses them, and a cancelled job stops.
func TestPipelineRefusesBadJobs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	b, err := ggmlimage.Open(ctx, ggmlimage.Config{
		ModelDir: dir,
		Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 32, Height: 32, Steps: 2, GuidanceScale: 7, MaxSize: 64, MaxSteps: 4, Threads: 1},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		name string
		job  genq.Job
		want string
	}{
		{"size over the limit", genq.Job{Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Width: 128, Height: 128}}, "128"},
		{"size not a multiple of 16", genq.Job{Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Width: 40, Height: 32}}, "16"},
		{"too many steps", genq.Job{Envelope: genq.Envelope{Text: "x"}, ImageRequest: genq.ImageRequest{Steps: 5}}, "num_inference_steps"},
		{"no text", genq.Job{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Generate(ctx, tc.job, nil)
			if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v (code %v), want an invalid job naming %q", err, genq.ErrorCode(err), tc.want)
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Generate(cancelled, genq.Job{Envelope: genq.Envelope{Text: "x"}}, nil); err == nil {
		t.Error("a cancelled job ran")
	}
}

// Without T5 (IMAGE_T5=off) the engine needs no T5 file, and the
// transformer sees zeros in its rows: another image than with T5.
func TestPipelineWithoutT5(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 4, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	cfg := ggmlimage.Config{ModelDir: dir, Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 32, Height: 32, Steps: 2, GuidanceScale: 7, Threads: 1}}
	seed := int64(5)
	job := genq.Job{Envelope: genq.Envelope{Text: "a red cat"}, TextRequest: genq.TextRequest{Seed: &seed}}
	generate := func(cfg ggmlimage.Config) []byte {
		b, err := ggmlimage.Open(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r, err := b.Generate(ctx, job, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Data
	}
	with := generate(cfg)
	if err := os.Remove(filepath.Join(dir, sd3.T5File)); err != nil {
		t.Fatal(err)
	}
	if _, err := ggmlimage.Open(ctx, cfg, nil); err == nil {
		t.Fatal("opened with T5 on and no T5 file")
	}
	cfg.NoT5 = true
	if without := generate(cfg); bytes.Equal(with, without) {
		t.Error("T5's rows made no difference")
	}
}

// A misshapen tensor in any part stops Open with one line naming it.
func TestOpenRefusesAMisshapenTensor(t *testing.T) {
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 4, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	c := sd3.TinyMMDiT()
	specs := c.MMDiTTensors()
	const name = "transformer_blocks.1.ff.net.2.weight"
	i := slices.IndexFunc(specs, func(s sd3.Spec) bool { return s.Name == name })
	specs[i].Shape = []int{specs[i].Shape[0], specs[i].Shape[1] / 2}
	w := sd3.RandomWeights(specs, 1)
	for k, v := range c.RandomMMDiTWeights(1) {
		if k != name {
			w[k] = v
		}
	}
	if err := sd3.WriteGGUF(filepath.Join(dir, sd3.TransformerFile), sd3.ArchMMDiT, c.MMDiTMetadata(), specs, w, sd3.F16); err != nil {
		t.Fatal(err)
	}
	_, err := ggmlimage.Open(context.Background(), ggmlimage.Config{ModelDir: dir, Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 32, Height: 32, Steps: 2, Threads: 1}}, nil)
	if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming %s, got %v", name, err)
	}
	t.Log(err)
}

// With bfloat16 products on more than one thread, IMAGE_BLAS=auto leaves
// OpenBLAS out (its threads would spin beside ggml's); one thread, or an
// explicit IMAGE_BLAS=on, keeps it.
func TestBFloat16OnThreadsLeavesOpenBLASOut(t *testing.T) {
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	blas := func(threads int, blas, bfloat16 string) string {
		b, err := ggmlimage.Open(context.Background(), ggmlimage.Config{
			ModelDir: dir,
			BLAS:     blas,
			BFloat16: bfloat16,
			Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: 32, Height: 32, Steps: 2, Threads: threads},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		return b.BLAS()
	}
	if blas(1, "", ggmlimage.BFloat16On) == "" {
		t.Skip("the engine has no BLAS module")
	}
	for _, tc := range []struct {
		threads        int
		blas, bfloat16 string
		want           bool
	}{
		{2, "", ggmlimage.BFloat16On, false},
		{2, "on", ggmlimage.BFloat16On, true},
		{2, "", ggmlimage.BFloat16Off, true},
	} {
		if got := blas(tc.threads, tc.blas, tc.bfloat16) != ""; got != tc.want {
			t.Errorf("%d threads, IMAGE_BLAS %q, IMAGE_BFLOAT16 %s: OpenBLAS %v, want %v", tc.threads, tc.blas, tc.bfloat16, got, tc.want)
		}
	}
}
