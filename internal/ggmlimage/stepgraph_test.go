package ggmlimage

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// BenchmarkStepGraph: what keeping the transformer's graph from one step
// to the next saves the host. SD3-medium's depth (24 blocks, about 2,900
// operations a step) at about the tiny export's widths and 16×16 latents, so
// that building, checking and laying out the graph, not computing it, is
// most of a call: "built anew" drops the kept graph before each call.
func BenchmarkStepGraph(b *testing.B) {
	cfg := sd3.TinyMMDiT()
	cfg.Layers = sd3.MediumMMDiT().Layers
	cfg.Heads, cfg.HeadDim = 1, 16 // ggml's tiled CPU attention takes heads of 16 values and more
	dir := b.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 1, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F16, MMDiT: &cfg}); err != nil {
		b.Fatal(err)
	}
	m, err := OpenTransformer(filepath.Join(dir, sd3.TransformerFile), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	values := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	in := TransformerInput{N: 2, H: 16, W: 16, SeqLen: 333, Timesteps: []float32{500, 500}}
	in.Latents = values(in.N * cfg.InChannels * in.H * in.W)
	in.Text = values(in.N * in.SeqLen * cfg.JointDim)
	in.Pooled = values(in.N * cfg.PooledDim)
	for _, anew := range []bool{false, true} {
		name := "kept"
		if anew {
			name = "built anew"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if anew {
					m.dropStep()
				}
				if _, err := m.Predict(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
