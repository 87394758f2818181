package tensor

import (
	"math"
	"os"
	"strings"
	"testing"
)

// backend is the CPU backend on the engine make engine builds; without
// it (LLAMA_LIB_DIR unset) the test is skipped.
func backend(t *testing.T) *Backend {
	t.Helper()
	if os.Getenv("LLAMA_LIB_DIR") == "" {
		t.Skip("LLAMA_LIB_DIR is unset (make engine)")
	}
	be, err := NewCPU("", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	return be
}

func near(t *testing.T, what string, got, want []float32) {
	t.Helper()
	nearWithin(t, what, got, want, 1e-4)
}

func nearWithin(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestOps: a matrix product, a norm and a convolution computed by ggml
// against the same arithmetic in Go.
func TestOps(t *testing.T) {
	be := backend(t)

	g := be.NewGraph()
	defer g.Close()
	a := g.Input([]float32{1, 2, 3, 4, 5, 6}, 3, 2)  // rows [1 2 3], [4 5 6]
	b := g.Input([]float32{1, 0, -1, 2, 1, 0}, 3, 2) // rows [1 0 -1], [2 1 0]
	got, err := g.Compute(a.MulMat(b).Add(g.Input([]float32{10}, 1)))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mul_mat", got, []float32{10 - 2, 10 - 2, 10 + 4, 10 + 13}) // [a0·b0, a1·b0, a0·b1, a1·b1] + 10

	g2 := be.NewGraph()
	defer g2.Close()
	got, err = g2.Compute(g2.Input([]float32{1, 2, 3, 4}, 4).Norm(0).Scale(2))
	if err != nil {
		t.Fatal(err)
	}
	s := math.Sqrt(1.25)
	near(t, "norm", got, []float32{float32(-3 / s), float32(-1 / s), float32(1 / s), float32(3 / s)})

	// A 3x3 convolution, padding 1, of a 4x4 image with 2 channels into 3.
	const w, h, cin, cout = 4, 4, 2, 3
	x := make([]float32, w*h*cin)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	k := make([]float32, 3*3*cin*cout)
	for i := range k {
		k[i] = float32(i%5)/5 - 0.4
	}
	want := make([]float32, w*h*cout)
	for o := range cout {
		for yy := range h {
			for xx := range w {
				var sum float32
				for c := range cin {
					for ky := range 3 {
						for kx := range 3 {
							sx, sy := xx+kx-1, yy+ky-1
							if sx < 0 || sy < 0 || sx >= w || sy >= h {
								continue
							}
							sum += x[(c*h+sy)*w+sx] * k[((o*cin+c)*3+ky)*3+kx]
						}
					}
				}
				want[(o*h+yy)*w+xx] = sum
			}
		}
	}
	g3 := be.NewGraph()
	defer g3.Close()
	conv := g3.Input(k, 3, 3, cin, cout).Conv2D(g3.Input(x, w, h, cin, 1), 1, 1, 1, 1, 1, 1)
	if conv.Dim(0) != w || conv.Dim(1) != h || conv.Dim(2) != cout {
		t.Fatalf("conv shape %d×%d×%d", conv.Dim(0), conv.Dim(1), conv.Dim(2))
	}
	got, err = g3.Compute(conv)
	if err != nil {
		t.Fatal(err)
	}
	// The CPU's matrix product rounds its operands to F16 (llamafile's
	// kernels), as the image engine's F16 weights are anyway.
	nearWithin(t, "conv_2d", got, want, 1e-3)
}

// TestElementOps: the operations the text encoders and the transformer add,
// each against the same arithmetic in Go.
func TestElementOps(t *testing.T) {
	be := backend(t)
	x := []float32{-2, -0.5, 0, 0.25, 1, 3} // [3, 2]
	each := func(f func(float64) float64) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(f(float64(v)))
		}
		return out
	}
	rms := func() []float32 {
		out := make([]float32, len(x))
		for r := range 2 {
			row := x[3*r : 3*r+3]
			var ss float64
			for _, v := range row {
				ss += float64(v * v)
			}
			for i, v := range row {
				out[3*r+i] = float32(float64(v) / math.Sqrt(ss/3+1e-6))
			}
		}
		return out
	}()
	softmax := func(scale float64, mask []float32) []float32 {
		out := make([]float32, len(x))
		for r := range 2 {
			var sum float64
			for i := range 3 {
				sum += math.Exp(float64(x[3*r+i])*scale + float64(mask[3*r+i]))
			}
			for i := range 3 {
				out[3*r+i] = float32(math.Exp(float64(x[3*r+i])*scale+float64(mask[3*r+i])) / sum)
			}
		}
		return out
	}
	inf := float32(math.Inf(-1))
	mask := []float32{0, inf, 0, 0, 0, inf}
	for _, tc := range []struct {
		name string
		op   func(g *Graph, in Tensor) Tensor
		want []float32
	}{
		{"tanh", func(_ *Graph, in Tensor) Tensor { return in.Tanh() }, each(math.Tanh)},
		{"sigmoid", func(_ *Graph, in Tensor) Tensor { return in.Sigmoid() }, each(func(v float64) float64 { return 1 / (1 + math.Exp(-v)) })},
		{"gelu_erf", func(_ *Graph, in Tensor) Tensor { return in.GELUErf() }, each(func(v float64) float64 { return v / 2 * (1 + math.Erf(v/math.Sqrt2)) })},
		{"rms_norm", func(_ *Graph, in Tensor) Tensor { return in.RMSNorm(1e-6) }, rms},
		{"slice", func(_ *Graph, in Tensor) Tensor { return in.Slice(0, 1, 3).Contiguous() }, []float32{-0.5, 0, 1, 3}},
		{"slice rows", func(_ *Graph, in Tensor) Tensor { return in.Slice(1, 1, 2).Contiguous() }, []float32{0.25, 1, 3}},
		{"concat", func(_ *Graph, in Tensor) Tensor { return in.Slice(1, 1, 2).Concat(in.Slice(1, 0, 1), 1) }, []float32{0.25, 1, 3, -2, -0.5, 0}},
		{"pad", func(_ *Graph, in Tensor) Tensor { return in.Pad(1, 0, 0, 0) }, []float32{-2, -0.5, 0, 0, 0.25, 1, 3, 0}},
		{"get_rows", func(g *Graph, in Tensor) Tensor { return in.GetRows(g.InputInts([]int32{1, 1, 0}, 3)) }, []float32{0.25, 1, 3, 0.25, 1, 3, -2, -0.5, 0}},
		{"soft_max scaled", func(_ *Graph, in Tensor) Tensor { return in.SoftMaxScaled(0.5) }, softmax(0.5, make([]float32, 6))},
		{"soft_max masked", func(g *Graph, in Tensor) Tensor { return in.SoftMaxMasked(g.Input(mask, 3, 2), 2) }, softmax(2, mask)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := be.NewGraph()
			defer g.Close()
			got, err := g.Compute(tc.op(g, g.Input(x, 3, 2)))
			if err != nil {
				t.Fatal(err)
			}
			nearWithin(t, tc.name, got, tc.want, 1e-5)
		})
	}
}

// TestComputeAll: an output a later operation reads keeps its values.
func TestComputeAll(t *testing.T) {
	be := backend(t)
	g := be.NewGraph()
	defer g.Close()
	a := g.Input([]float32{1, 2, 3}, 3).Scale(2)
	b := a.Tanh().Scale(3)
	got, err := g.ComputeAll(a, b)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "first", got[0], []float32{2, 4, 6})
	near(t, "second", got[1], []float32{float32(3 * math.Tanh(2)), float32(3 * math.Tanh(4)), float32(3 * math.Tanh(6))})
}

// TestDeviceChoice: the CPU is always there; asking for CUDA of an engine
// built without it is an error that says so, not a silent CPU.
func TestDeviceChoice(t *testing.T) {
	if os.Getenv("LLAMA_LIB_DIR") == "" {
		t.Skip("LLAMA_LIB_DIR is unset (make engine)")
	}
	be, err := Open(Options{Device: DeviceAuto, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Device().Kind == DeviceCPU {
		if _, err := Open(Options{Device: DeviceCUDA}); err == nil || !strings.Contains(err.Error(), "CUDA") {
			t.Errorf("cuda on an engine without a GPU: %v", err)
		}
	}
	if _, err := Open(Options{Device: "tpu"}); err == nil {
		t.Error("device tpu opened")
	}
}

// TestConv3x3: the convolution without im2col against ggml's conv_2d, on
// an image that is not square, two of them.
func TestConv3x3(t *testing.T) {
	be := backend(t)
	const w, h, cin, cout, n = 7, 5, 6, 4, 2
	x := make([]float32, w*h*cin*n)
	for i := range x {
		x[i] = float32((i*7)%11)/5 - 1
	}
	k := make([]float32, 9*cin*cout)
	for i := range k {
		k[i] = float32((i*5)%13)/13 - 0.5
	}
	g := be.NewGraph()
	defer g.Close()
	kernel, img := g.Input(k, 3, 3, cin, cout), g.Input(x, w, h, cin, n)
	cl := kernel.Conv3x3ChannelsLast(img.Permute(1, 2, 0, 3).Contiguous()) // [Cout, W, H, N]
	got, err := g.ComputeAll(kernel.Conv2D(img, 1, 1, 1, 1, 1, 1), cl.Permute(2, 0, 1, 3).Contiguous())
	if err != nil {
		t.Fatal(err)
	}
	nearWithin(t, "conv3x3", got[1], got[0], 2e-3)
}
