package ggmlimage_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// The ggml decoder against ONNX Runtime running the tiny export's decoder,
// on the same weights and latents. In F32 they must agree within 1e-3 of
// the largest output; F16 weights are measured against the same bound
// times ten, and with the 3×3 kernels as bfloat16 (Config.BFloat16)
// times thirty; the error is logged.
func TestVAEDecoderMatchesONNX(t *testing.T) {
	for _, tc := range []struct {
		dtype    sd3.DType
		bfloat16 bool
		tol      float64
	}{{sd3.F32, false, 1e-3}, {sd3.F16, false, 1e-2}, {sd3.F16, true, 3e-2}} {
		name := string(tc.dtype)
		open := ggmlimage.OpenVAEDecoder
		if tc.bfloat16 {
			name, open = name+" in bfloat16", ggmlimage.OpenVAEDecoderBFloat16
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tinyexport.WriteWithOptions(dir, 5, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: tc.dtype}); err != nil {
				t.Fatal(err)
			}
			const n, h, w = 2, 6, 4 // not square, so a swapped axis shows
			latents := normal(n*16*h*w, 9)
			want := runONNX(t, filepath.Join(dir, "vae_decoder", "model.onnx"), "latent_sample", "sample",
				latents, []int64{n, 16, h, w}, []int64{n, 3, 8 * h, 8 * w})

			dec, err := open(filepath.Join(dir, sd3.VAEDecoderFile), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer dec.Close()
			got, err := dec.Decode(latents, n, h, w)
			if err != nil {
				t.Fatal(err)
			}
			checkNear(t, name+" weights", got, want, tc.tol)
		})
	}
}

func TestVAEDecoderRefusesAMisshapenTensor(t *testing.T) {
	cfg := sd3.TinyVAE()
	specs := cfg.VAEDecoderTensors()
	i := slices.IndexFunc(specs, func(s sd3.Spec) bool { return s.Name == "decoder.up_blocks.1.resnets.0.conv2.weight" })
	specs[i].Shape = []int{8, 8, 3, 3} // 16 output channels in the config
	path := filepath.Join(t.TempDir(), "vae.gguf")
	if err := sd3.WriteGGUF(path, sd3.ArchVAE, cfg.VAEMetadata(), specs, sd3.RandomWeights(specs, 1), sd3.F32); err != nil {
		t.Fatal(err)
	}
	_, err := ggmlimage.OpenVAEDecoder(path, 1)
	if err == nil || !strings.Contains(err.Error(), specs[i].Name) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming %s, got %v", specs[i].Name, err)
	}
}

func normal(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// compare returns the largest absolute difference and the largest
// absolute reference value.
func compare(t *testing.T, got, want []float32) (diff, scale float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if math.IsNaN(float64(got[i])) {
			t.Fatalf("value %d is NaN", i)
		}
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	return diff, scale
}

// checkNear logs how far got is from want, as a share of want's largest
// value, and fails the test past tol.
func checkNear(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	diff, scale := compare(t, got, want)
	t.Logf("%s: largest difference %.3g, %.3g of the largest value %.3g", what, diff, diff/scale, scale)
	if diff > tol*scale {
		t.Errorf("%s: largest difference %.3g is over %.0e of the largest value %.3g", what, diff, tol, scale)
	}
}

var ortOnce sync.Once

// runONNX runs one fp32 model with one input and one output through ONNX
// Runtime, the reference engine.
func runONNX(t *testing.T, path, inName, outName string, in []float32, inShape, outShape []int64) []float32 {
	t.Helper()
	return runONNXInputs(t, path, []onnxInput{{name: inName, data: in, shape: inShape}}, outName, outShape)
}

type onnxInput struct {
	name  string
	data  []float32
	ids   []int64 // instead of data, for token ids
	shape []int64
}

// runONNXIDs runs a text encoder on token ids and returns one output.
func runONNXIDs(t *testing.T, path string, ids, shape []int64, outName string, outShape []int64) []float32 {
	t.Helper()
	return runONNXInputs(t, path, []onnxInput{{name: "input_ids", ids: ids, shape: shape}}, outName, outShape)
}

func runONNXInputs(t *testing.T, path string, ins []onnxInput, outName string, outShape []int64) []float32 {
	t.Helper()
	lib := ortLibrary(t)
	var initErr error
	ortOnce.Do(func() {
		if !ort.IsInitialized() {
			ort.SetSharedLibraryPath(lib)
			initErr = ort.InitializeEnvironment(ort.WithLogLevelError())
		}
	})
	if initErr != nil {
		t.Fatal(initErr)
	}
	var inputs []ort.Value
	var names []string
	for _, in := range ins {
		var v ort.Value
		var err error
		if in.ids != nil {
			v, err = ort.NewTensor(ort.NewShape(in.shape...), in.ids)
		} else {
			v, err = ort.NewTensor(ort.NewShape(in.shape...), in.data)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer v.Destroy()
		inputs, names = append(inputs, v), append(names, in.name)
	}
	output, err := ort.NewEmptyTensor[float32](ort.NewShape(outShape...))
	if err != nil {
		t.Fatal(err)
	}
	defer output.Destroy()
	s, err := ort.NewDynamicAdvancedSession(path, names, []string{outName}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.Run(inputs, []ort.Value{output}); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(output.GetData())
}

// ortLibrary finds ONNX Runtime as internal/onnx's tests do: ONNXRUNTIME_LIB,
// else the repository's lib/onnxruntime; missing, the test is skipped unless
// GENQ_REQUIRE_ORT=1 (make test).
func ortLibrary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ONNXRUNTIME_LIB"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "lib", "onnxruntime", "libonnxruntime.so.1")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("GENQ_REQUIRE_ORT") == "1" {
		t.Fatalf("ONNX Runtime not found at %s and ONNXRUNTIME_LIB is unset", p)
	}
	t.Skipf("ONNX Runtime not found at %s", p)
	return ""
}
