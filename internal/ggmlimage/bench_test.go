package ggmlimage_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// benchSizes are the shapes both engines are timed on: the tiny test model,
// and a mid one (a 384-wide, 4-block transformer and a VAE with widths 32
// to 128) big enough that compute dominates.
var benchSizes = []struct {
	name          string
	mmdit         sd3.MMDiTConfig
	vae           sd3.VAEConfig
	width, height int
}{
	{"tiny", sd3.TinyMMDiT(), sd3.TinyVAE(), 256, 256},
	{"mid", func() sd3.MMDiTConfig {
		c := sd3.TinyMMDiT()
		c.Layers, c.Heads, c.HeadDim = 4, 6, 64
		return c
	}(), sd3.VAEConfig{LatentChannels: 16, BlockOut: []int{32, 64, 128, 128}, LayersPerBlock: 2, Groups: 8, Scaling: 1.5305, Shift: 0.0609}, 256, 256},
}

// benchThreads is each engine's thread count. One: on a CPU shared with
// other work, ggml's threads wait for each other at every op, and a
// descheduled thread stalls the graph (docs/benchmarks.md).
const benchThreads = 1

// imageEngine is what the benchmark needs of either backend.
type imageEngine interface {
	Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error)
	ObserveSteps(func(step int, latents []float32))
	Close() error
}

// BenchmarkEngines times one 256×256 image of 4 steps on each engine, on
// the same weights, with benchThreads each: seconds per step (the median
// step) and per image (prompt encoding, the steps and the VAE).
func BenchmarkEngines(b *testing.B) {
	const steps = 4
	for _, size := range benchSizes {
		for _, engine := range []string{"onnxruntime", "ggml-f32", "ggml-f16"} {
			b.Run(size.name+"/"+engine, func(b *testing.B) {
				dir := b.TempDir()
				opts := tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F32, MMDiT: &size.mmdit, VAE: &size.vae}
				if engine == "ggml-f16" {
					opts.GGMLWeights = sd3.F16
				}
				if err := tinyexport.WriteWithOptions(dir, 1, opts); err != nil {
					b.Fatal(err)
				}
				var e imageEngine
				var err error
				if engine == "onnxruntime" {
					e, err = onnx.Open(context.Background(), onnx.Config{ModelDir: dir, LibraryPath: ortLibrary(b), Device: onnx.DeviceCPU,
						Width: size.width, Height: size.height, Steps: steps, Threads: benchThreads}, nil)
				} else {
					e, err = ggmlimage.Open(context.Background(), ggmlimage.Config{ModelDir: dir, Device: ggmlimage.DeviceCPU,
						Width: size.width, Height: size.height, Steps: steps, GuidanceScale: 7, MaxSize: size.width, MaxSteps: steps, Threads: benchThreads}, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				var stepTimes []time.Duration
				last := time.Now()
				e.ObserveSteps(func(int, []float32) {
					stepTimes = append(stepTimes, time.Since(last))
					last = time.Now()
				})
				seed := int64(3)
				job := genq.Job{Text: "a photo of a cat", Seed: &seed}
				b.ResetTimer()
				for range b.N {
					last = time.Now()
					if _, err := e.Generate(context.Background(), job, func(genq.Progress) { last = time.Now() }); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				slices.Sort(stepTimes)
				b.ReportMetric(stepTimes[len(stepTimes)/2].Seconds(), "s/step")
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/image")
			})
		}
	}
}
