package tensor

import (
	"math"
	"os"
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
