package ggmlimage_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// The ggml transformer against ONNX Runtime running the tiny export's
// faithful transformer, on the same weights and inputs: a batch of two
// with their own timesteps, latents that are not square, and a text
// sequence of the real one's 77+256 layout at tiny width.
func TestTransformerMatchesONNX(t *testing.T) {
	for _, tc := range []struct {
		dtype    sd3.DType
		bfloat16 bool // the float16 matrices kept as bfloat16, as on a GPU from Ampere on
		tol      float64
	}{{sd3.F32, false, 1e-3}, {sd3.F16, false, 1e-2}, {sd3.F16, true, 2e-2}} {
		name := string(tc.dtype)
		if tc.bfloat16 {
			name += " as bf16"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tinyexport.WriteWithOptions(dir, 5, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: tc.dtype}); err != nil {
				t.Fatal(err)
			}
			in, want := transformerCase(t, dir, sd3.TinyMMDiT(), 8, 12)
			open := ggmlimage.OpenTransformer
			if tc.bfloat16 {
				open = ggmlimage.OpenTransformerBFloat16
			}
			m, err := open(filepath.Join(dir, sd3.TransformerFile), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			got, err := m.Predict(in)
			if err != nil {
				t.Fatal(err)
			}
			checkNear(t, name+" weights", got, want, tc.tol)
		})
	}
}

// TestMidTransformerMatchesONNX: at the mid size, whose products are
// large enough for ggml's BLAS backend to take them (each side at least
// 32), the transformer matches ONNX Runtime with its products and
// attention through OpenBLAS and through ggml's own kernels. Without the
// BLAS module (OpenBLAS not installed when the engine was built) only
// the second runs.
func TestMidTransformerMatchesONNX(t *testing.T) {
	dir := t.TempDir()
	cfg, vae := sd3.MidMMDiT(), sd3.TinyVAE()
	if err := tinyexport.WriteWithOptions(dir, 6, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F16, MMDiT: &cfg, VAE: &vae}); err != nil {
		t.Fatal(err)
	}
	in, want := transformerCase(t, dir, cfg, 16, 16)
	for _, blas := range []string{tensor.BLASOff, tensor.BLASAuto} {
		t.Run("blas "+blas, func(t *testing.T) {
			m, kernels, err := ggmlimage.OpenTransformerBLAS(filepath.Join(dir, sd3.TransformerFile), 1, blas)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if blas == tensor.BLASAuto && kernels == "" {
				t.Skip("the engine has no BLAS module (OpenBLAS was not installed when make engine built it)")
			}
			got, err := m.Predict(in)
			if err != nil {
				t.Fatal(err)
			}
			checkNear(t, "mid, blas "+blas+" "+kernels, got, want, 1e-2)
		})
	}
}

// transformerCase is a batch of two latents of h×w with their own
// timesteps, a text of the real one's 77+256 rows and pooled text, all
// random, for the transformer of shapes cfg exported in dir, and ONNX
// Runtime's output for them.
func transformerCase(t *testing.T, dir string, cfg sd3.MMDiTConfig, h, w int) (ggmlimage.TransformerInput, []float32) {
	t.Helper()
	in := ggmlimage.TransformerInput{N: 2, H: h, W: w, SeqLen: 333, Timesteps: []float32{1000, 250.5}}
	in.Latents = normal(in.N*cfg.InChannels*in.H*in.W, 1)
	in.Text = normal(in.N*in.SeqLen*cfg.JointDim, 2)
	in.Pooled = normal(in.N*cfg.PooledDim, 3)
	return in, transformerWant(t, dir, cfg, in)
}

// transformerWant is ONNX Runtime's output for in, from the export in dir.
func transformerWant(t *testing.T, dir string, cfg sd3.MMDiTConfig, in ggmlimage.TransformerInput) []float32 {
	t.Helper()
	n, h, w := int64(in.N), int64(in.H), int64(in.W)
	return runONNXInputs(t, filepath.Join(dir, "transformer", "model.onnx"), []onnxInput{
		{name: "hidden_states", data: in.Latents, shape: []int64{n, 16, h, w}},
		{name: "encoder_hidden_states", data: in.Text, shape: []int64{n, int64(in.SeqLen), int64(cfg.JointDim)}},
		{name: "pooled_projections", data: in.Pooled, shape: []int64{n, int64(cfg.PooledDim)}},
		{name: "timestep", data: in.Timesteps, shape: []int64{n}},
	}, "out_hidden_states", []int64{n, 16, h, w})
}

// TestTransformerFollowsTheText: the text's context embedding is computed
// once and kept for the calls that follow with the same text (an image's
// steps); a call with other text gets that text's, and the first text,
// back again, its own.
func TestTransformerFollowsTheText(t *testing.T) {
	dir := t.TempDir()
	cfg := sd3.TinyMMDiT()
	if err := tinyexport.WriteWithOptions(dir, 5, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F32}); err != nil {
		t.Fatal(err)
	}
	a, wantA := transformerCase(t, dir, cfg, 8, 8)
	b := a
	b.Text = normal(len(a.Text), 7)
	wantB := transformerWant(t, dir, cfg, b)
	m, err := ggmlimage.OpenTransformer(filepath.Join(dir, sd3.TransformerFile), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i, c := range []struct {
		in   ggmlimage.TransformerInput
		want []float32
	}{{a, wantA}, {a, wantA}, {b, wantB}, {b, wantB}, {a, wantA}} {
		got, err := m.Predict(c.in)
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, fmt.Sprintf("call %d", i+1), got, c.want, 1e-3)
	}
}
