package ggmlimage_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/diffusion"
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
	{"mid", sd3.MidMMDiT(), sd3.MidVAE(), 256, 256},
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
					e, err = onnx.Open(context.Background(), onnx.Config{
						ModelDir:    dir,
						LibraryPath: ortLibrary(b),
						Pipeline:    diffusion.Pipeline{Device: onnx.DeviceCPU, Width: size.width, Height: size.height, Steps: steps, Threads: benchThreads},
					}, nil)
				} else {
					e, err = ggmlimage.Open(context.Background(), ggmlimage.Config{
						ModelDir: dir,
						Pipeline: diffusion.Pipeline{Device: ggmlimage.DeviceCPU, Width: size.width, Height: size.height, Steps: steps, GuidanceScale: 7, MaxSize: size.width, MaxSteps: steps, Threads: benchThreads},
					}, nil)
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
				job := genq.Job{Envelope: genq.Envelope{Text: "a photo of a cat"}, TextRequest: genq.TextRequest{Seed: &seed}}
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

// BenchmarkVAEDecoders times the mid VAE decoding a 256×256 image on each
// engine, the same weights (f32 in ONNX Runtime, f16 in ggml, as
// BenchmarkEngines runs them; ggml-bf16 with its 3×3 kernels as bfloat16,
// Config.BFloat16), benchThreads each: the part of an image outside its
// steps that costs most.
func BenchmarkVAEDecoders(b *testing.B) {
	size := benchSizes[1]
	dir := writeBenchModel(b, size.mmdit, size.vae)
	h, w := size.height/8, size.width/8
	latents := normal(size.vae.LatentChannels*h*w, 3)
	b.Run("onnxruntime", func(b *testing.B) {
		benchONNX(b, filepath.Join(dir, "vae_decoder", "model.onnx"),
			[]onnxInput{{name: "latent_sample", data: latents, shape: []int64{1, int64(size.vae.LatentChannels), int64(h), int64(w)}}},
			"sample", []int64{1, 3, int64(size.height), int64(size.width)})
	})
	for name, open := range map[string]func(string, int) (*ggmlimage.VAEDecoder, error){
		"ggml": ggmlimage.OpenVAEDecoder, "ggml-bf16": ggmlimage.OpenVAEDecoderBFloat16} {
		b.Run(name, func(b *testing.B) {
			d, err := open(filepath.Join(dir, sd3.VAEDecoderFile), benchThreads)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			benchLoop(b, func() error { _, err := d.Decode(latents, 1, h, w); return err })
		})
	}
}

// BenchmarkTransformers times one step's transformer call of the mid
// model on each engine: a 256×256 image's latents at batch 2 (the
// negative prompt and the prompt), with SD3's 77+256 text tokens; ggml-bf16
// with its matrices as bfloat16 (Config.BFloat16).
func BenchmarkTransformers(b *testing.B) {
	size := benchSizes[1]
	dir := writeBenchModel(b, size.mmdit, size.vae)
	cfg := size.mmdit
	in := ggmlimage.TransformerInput{N: 2, H: size.height / 8, W: size.width / 8, SeqLen: 333, Timesteps: []float32{1000, 1000}}
	in.Latents = normal(in.N*cfg.InChannels*in.H*in.W, 1)
	in.Text = normal(in.N*in.SeqLen*cfg.JointDim, 2)
	in.Pooled = normal(in.N*cfg.PooledDim, 3)
	n, h, w := int64(in.N), int64(in.H), int64(in.W)
	b.Run("onnxruntime", func(b *testing.B) {
		benchONNX(b, filepath.Join(dir, "transformer", "model.onnx"), []onnxInput{
			{name: "hidden_states", data: in.Latents, shape: []int64{n, 16, h, w}},
			{name: "encoder_hidden_states", data: in.Text, shape: []int64{n, int64(in.SeqLen), int64(cfg.JointDim)}},
			{name: "pooled_projections", data: in.Pooled, shape: []int64{n, int64(cfg.PooledDim)}},
			{name: "timestep", data: in.Timesteps, shape: []int64{n}},
		}, "out_hidden_states", []int64{n, 16, h, w})
	})
	for name, open := range map[string]func(string, int) (*ggmlimage.Transformer, error){
		"ggml": ggmlimage.OpenTransformer, "ggml-bf16": ggmlimage.OpenTransformerBFloat16} {
		b.Run(name, func(b *testing.B) {
			m, err := open(filepath.Join(dir, sd3.TransformerFile), benchThreads)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			benchLoop(b, func() error { _, err := m.Predict(in); return err })
		})
	}
}

// writeBenchModel writes the faithful export of the given shapes: f32 for
// ONNX Runtime, f16 GGUF files for ggml.
func writeBenchModel(b *testing.B, mmdit sd3.MMDiTConfig, vae sd3.VAEConfig) string {
	dir := b.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F16, MMDiT: &mmdit, VAE: &vae}); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchLoop runs f once to warm up, then b.N timed times.
func benchLoop(b *testing.B, f func() error) {
	if err := f(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchONNX times ONNX Runtime running the model at path on ins, with
// benchThreads intra-op threads, as genq's ONNX engine runs it.
func benchONNX(b *testing.B, path string, ins []onnxInput, outName string, outShape []int64) {
	lib := ortLibrary(b)
	ortOnce.Do(func() {
		if !ort.IsInitialized() {
			ort.SetSharedLibraryPath(lib)
			if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
				b.Fatal(err)
			}
		}
	})
	opts, err := ort.NewSessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer opts.Destroy()
	if err := opts.SetIntraOpNumThreads(benchThreads); err != nil {
		b.Fatal(err)
	}
	var inputs []ort.Value
	var names []string
	for _, in := range ins {
		v, err := ort.NewTensor(ort.NewShape(in.shape...), in.data)
		if err != nil {
			b.Fatal(err)
		}
		defer v.Destroy()
		inputs, names = append(inputs, v), append(names, in.name)
	}
	out, err := ort.NewEmptyTensor[float32](ort.NewShape(outShape...))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Destroy()
	s, err := ort.NewAdvancedSession(path, names, []string{outName}, inputs, []ort.Value{out}, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	benchLoop(b, s.Run)
}
