package tensor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/genq/genq/internal/gguf"
)

// backend is the CPU backend on the engine make engine builds, with
// ggml's own kernels (TestBLASBackend has the BLAS backend's); without
// it (LLAMA_LIB_DIR unset) the test is skipped.
func backend(t *testing.T) *Backend {
	t.Helper()
	if os.Getenv("LLAMA_LIB_DIR") == "" {
		t.Skip("LLAMA_LIB_DIR is unset (make engine)")
	}
	be, err := Open(Options{Device: DeviceCPU, Threads: 1, BLAS: BLASOff})
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
		{"sqr", func(_ *Graph, in Tensor) Tensor { return in.Sqr() }, each(func(v float64) float64 { return v * v })},
		{"sqrt of sqr", func(_ *Graph, in Tensor) Tensor { return in.Sqr().Sqrt() }, each(math.Abs)},
		{"scale_bias", func(_ *Graph, in Tensor) Tensor { return in.ScaleBias(2, 0.5) }, each(func(v float64) float64 { return 2*v + 0.5 })},
		{"sub, div by a row", func(g *Graph, in Tensor) Tensor {
			row := g.Input([]float32{1, 2, 4}, 3)
			return in.Sub(row).Div(row)
		}, []float32{-3, -1.25, -1, -0.75, -0.5, -0.25}},
		{"repeat", func(_ *Graph, in Tensor) Tensor { return in.Slice(1, 0, 1).Repeat(3, 2) }, []float32{-2, -0.5, 0, -2, -0.5, 0}},
		{"identity product transposes", func(g *Graph, in Tensor) Tensor { return in.MulMat(g.Identity(3, 1)) }, []float32{-2, 0.25, -0.5, 1, 0, 3}},
		{"ones product sums rows", func(g *Graph, in Tensor) Tensor { return g.Ones(3).MulMat(in) }, []float32{-2.5, 4.25}},
		{"transposed", func(_ *Graph, in Tensor) Tensor { return in.Transposed() }, []float32{-2, 0.25, -0.5, 1, 0, 3}},
		{"transposed for CUDA", func(g *Graph, in Tensor) Tensor {
			g.be.forCUDA = true
			defer func() { g.be.forCUDA = false }()
			return in.Transposed()
		}, []float32{-2, 0.25, -0.5, 1, 0, 3}},
		{"row sums", func(_ *Graph, in Tensor) Tensor { return in.RowSums() }, []float32{-2.5, 4.25}},
		{"sigmoid", func(_ *Graph, in Tensor) Tensor { return in.Sigmoid() }, each(func(v float64) float64 { return 1 / (1 + math.Exp(-v)) })},
		{"gelu_erf", func(_ *Graph, in Tensor) Tensor { return in.GELUErf() }, each(func(v float64) float64 { return v / 2 * (1 + math.Erf(v/math.Sqrt2)) })},
		{"rms_norm", func(_ *Graph, in Tensor) Tensor { return in.RMSNorm(1e-6) }, rms},
		{"slice", func(_ *Graph, in Tensor) Tensor { return in.Slice(0, 1, 3).Contiguous() }, []float32{-0.5, 0, 1, 3}},
		{"slice rows", func(_ *Graph, in Tensor) Tensor { return in.Slice(1, 1, 2).Contiguous() }, []float32{0.25, 1, 3}},
		{"concat", func(_ *Graph, in Tensor) Tensor { return in.Slice(1, 1, 2).Concat(in.Slice(1, 0, 1), 1) }, []float32{0.25, 1, 3, -2, -0.5, 0}},
		{"get_rows", func(g *Graph, in Tensor) Tensor { return in.GetRows(g.InputInts([]int32{1, 1, 0}, 3)) }, []float32{0.25, 1, 3, 0.25, 1, 3, -2, -0.5, 0}},
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
	b := a.Sigmoid().Scale(3)
	got, err := g.ComputeAll(a, b)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "first", got[0], []float32{2, 4, 6})
	sig := func(v float64) float32 { return float32(3 / (1 + math.Exp(-v))) }
	near(t, "second", got[1], []float32{sig(2), sig(4), sig(6)})
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
	const w, h, cin, n = 7, 5, 6, 2
	x := make([]float32, w*h*cin*n)
	for i := range x {
		x[i] = float32((i*7)%11)/5 - 1
	}
	// A float16 or bfloat16 kernel takes its windows in its own type: the
	// values rounded to 11 or 8 bits, the sums float32. 3 outputs are not
	// a multiple of 4, which the CPU's kernel gets by zero outputs.
	for _, tc := range []struct {
		typ  int32
		cout int
		tol  float64
	}{{typeF32, 4, 2e-3}, {typeF16, 4, 5e-3}, {typeBF16, 4, 3e-2}, {typeF32, 3, 2e-3}, {typeF16, 3, 5e-3}} {
		cout := tc.cout
		k := make([]float32, 9*cin*cout)
		for i := range k {
			k[i] = float32((i*5)%13)/13 - 0.5
		}
		t.Run(fmt.Sprintf("%s, %d outputs", typeName(tc.typ), cout), func(t *testing.T) {
			g := be.NewGraph()
			defer g.Close()
			kernel, img := g.Input(k, 3, 3, cin, cout), g.Input(x, w, h, cin, n)
			typed := kernel
			if tc.typ != typeF32 {
				typed = kernel.cast(tc.typ)
			}
			cl := typed.Conv3x3ChannelsLast(img.Permute(1, 2, 0, 3).Contiguous()) // [Cout, W, H, N]
			got, err := g.ComputeAll(kernel.Conv2D(img, 1, 1, 1, 1, 1, 1), cl.Permute(2, 0, 1, 3).Contiguous())
			if err != nil {
				t.Fatal(err)
			}
			nearWithin(t, "conv3x3", got[1], got[0], tc.tol)
		})
	}
}

// attentionCase is an attention's operands token by token, as the
// transformer has them: q [heads·d, nq, n], k and v [heads·d, nk, n].
type attentionCase struct {
	d, heads, nq, nk, n int
	q, bias, k, v       []float32
}

func newAttentionCase(d, heads, nq, nk, n int) attentionCase {
	val := func(i, mod int) float32 { return float32((i*7)%mod)/float32(mod) - 0.5 }
	c := attentionCase{d: d, heads: heads, nq: nq, nk: nk, n: n,
		q: make([]float32, d*heads*nq*n), bias: make([]float32, d*heads), k: make([]float32, d*heads*nk*n), v: make([]float32, d*heads*nk*n)}
	for i := range c.q {
		c.q[i] = 2 * val(i, 11)
	}
	for i := range c.bias {
		c.bias[i] = val(i+1, 7)
	}
	for i := range c.k {
		c.k[i], c.v[i] = 2*val(i, 13), val(i+3, 5)
	}
	return c
}

// want is softmax((q+bias)·k·scale)·v per head written out in Go, [heads·d,
// nq, n].
func (c attentionCase) want(scale float64) []float32 {
	size := c.d * c.heads
	out := make([]float32, size*c.nq*c.n)
	for b := range c.n {
		for h := range c.heads {
			for i := range c.nq {
				w := make([]float64, c.nk)
				var sum float64
				for j := range c.nk {
					var dot float64
					for x := range c.d {
						at := h*c.d + x
						dot += float64(c.q[(b*c.nq+i)*size+at]+c.bias[at]) * float64(c.k[(b*c.nk+j)*size+at])
					}
					w[j] = math.Exp(dot * scale)
					sum += w[j]
				}
				for x := range c.d {
					at := h*c.d + x
					var o float64
					for j := range c.nk {
						o += w[j] / sum * float64(c.v[(b*c.nk+j)*size+at])
					}
					out[(b*c.nq+i)*size+at] = float32(o)
				}
			}
		}
	}
	return out
}

// TestAttention: ggml's flash attention against the softmax of the scores
// written out in Go, two heads of 3 dimensions, 4 queries and 5 keys, the
// queries with their bias, and the two products with the scores between
// that a device without the flash kernel's head width computes.
func TestAttention(t *testing.T) {
	be := backend(t)
	c := newAttentionCase(3, 2, 4, 5, 1)
	const scale = 0.7
	for _, withScores := range []bool{false, true} {
		g := be.NewGraph()
		size := c.d * c.heads
		q := g.Input(c.q, size, c.nq, c.n).Queries(g.Input(c.bias, size), c.heads)
		k, v := g.Input(c.k, size, c.nk, c.n), g.Input(c.v, size, c.nk, c.n)
		var o Tensor
		if withScores {
			byHead := func(t Tensor) Tensor { return t.Reshape(c.d, c.heads, c.nk, c.n).Permute(0, 2, 1, 3) }
			o = q.withScores(Keys{k: byHead(k), v: byHead(v), keys: c.nk}.forProducts(), scale)
		} else {
			o = q.Attend(AttentionKeys(k, v, c.nk, c.heads), scale)
		}
		got, err := g.Compute(o)
		g.Close()
		if err != nil {
			t.Fatal(err)
		}
		nearWithin(t, fmt.Sprintf("with scores %v", withScores), got, c.want(scale), 2e-3)
	}
}

// TestGroupedAttention: attention with each head's queries in groups, as
// CUDA computes it, gives what the scores written out give, for query
// counts the groups do not divide, keys padded to 256 by Attend and by
// the caller, a batch of two, one head and several, with a bias and
// without, and the queries strided rows of a product of q, k and v
// together, as the transformer passes them.
func TestGroupedAttention(t *testing.T) {
	be := backend(t)
	const scale = 0.125
	for _, shape := range []struct{ d, heads, nq, nk, n int }{{64, 3, 37, 41, 2}, {64, 1, 30, 20, 2}} {
		c := newAttentionCase(shape.d, shape.heads, shape.nq, shape.nk, shape.n)
		size := c.d * c.heads
		for _, groups := range []int{1, 2, 3, 4, 8} {
			for _, bias := range []bool{true, false} {
				for _, callerPads := range []bool{false, true} {
					name := fmt.Sprintf("%d heads, %d groups, bias %v, keys padded by the caller %v", c.heads, groups, bias, callerPads)
					// as for CUDA: grouped, and laid out by adding zero
					be.groups, be.forCUDA = groups, groups > 1
					g := be.NewGraph()
					// q as the first third of a product of q, k and v: rows 3·size apart
					wide := make([]float32, 3*size*c.nq*c.n)
					for row := range c.nq * c.n {
						copy(wide[row*3*size:], c.q[row*size:(row+1)*size])
					}
					qt := g.Input(wide, 3*size, c.nq, c.n).Slice(0, 0, size)
					want := c
					var b Tensor
					if bias {
						b = g.Input(c.bias, size)
					} else {
						want.bias = make([]float32, size)
					}
					k, v := g.Input(c.k, size, c.nk, c.n), g.Input(c.v, size, c.nk, c.n)
					if pad := be.KeyPadding(c.nk); callerPads && pad > 0 {
						k, v = k.Concat(g.Zeros(size, pad, c.n), 1), v.Concat(g.Zeros(size, pad, c.n), 1)
					}
					got, err := g.Compute(qt.Queries(b, c.heads).Attend(AttentionKeys(k, v, c.nk, c.heads), scale))
					g.Close()
					be.groups, be.forCUDA = 1, false
					if err != nil {
						t.Fatal(err)
					}
					nearWithin(t, name, got, want.want(scale), 1e-4)
				}
			}
		}
	}
}

// TestProfileComputesTheSame: a graph computed operation by operation,
// timed, gives what it gives in one go, and the profile names its
// operations with their shapes.
func TestProfileComputesTheSame(t *testing.T) {
	be := backend(t)
	build := func(g *Graph) Tensor {
		a := g.Input([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
		b := g.Input([]float32{1, 0, -1, 2, 1, 0, 3, 3, 3}, 3, 3)
		return a.MulMat(b).Add(g.Input([]float32{10}, 1)).SILU()
	}
	g := be.NewGraph()
	defer g.Close()
	want, err := g.Compute(build(g))
	if err != nil {
		t.Fatal(err)
	}
	be.Profile(true)
	g2 := be.NewGraph()
	defer g2.Close()
	got, err := g2.Compute(build(g2))
	if err != nil {
		t.Fatal(err)
	}
	ops := be.Profiled()
	be.Profile(false)
	near(t, "profiled", got, want)
	var names []string
	for _, op := range ops {
		if op.Calls != 1 || op.Time <= 0 {
			t.Errorf("%s: %d calls, %v", op.Op, op.Calls, op.Time)
		}
		names = append(names, op.Op)
	}
	joined := strings.Join(names, "; ")
	for _, w := range []string{"MUL_MAT f32[2,3] ← f32[3,2] f32[3,3]", "ADD f32[2,3] ← f32[2,3] f32[1]", "SILU"} {
		if !strings.Contains(joined, w) {
			t.Errorf("profile %q lacks %q", joined, w)
		}
	}
	if len(be.Profiled()) != 0 {
		t.Error("Profile(false) kept the sums")
	}
}

// TestGELUTanh: GELU's tanh form against Go's arithmetic, wide inputs
// included, as float32 to within a few units in the last place: a row
// long enough for the CPU's vectors (engine patch 0004) and its tail.
func TestGELUTanh(t *testing.T) {
	be := backend(t)
	x := []float32{-12, -3, -1, -0.25, 0, 1e-4, 0.5, 2, 7.5, 30}
	for i := range 39 {
		x = append(x, -9.5+float32(i)*0.499)
	}
	want := make([]float32, len(x))
	for i, v := range x {
		f := float64(v)
		want[i] = float32(0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f))))
	}
	g := be.NewGraph()
	defer g.Close()
	got, err := g.Compute(g.Input(x, len(x)).GELUTanh())
	if err != nil {
		t.Fatal(err)
	}
	nearWithin(t, "gelu", got, want, 1e-6)
}

// TestGraphComputesAgain: a graph computes again with new inputs while it
// is the backend's current one, and refuses to once another graph has been
// laid out in the compute buffer (which may have moved it).
func TestGraphComputesAgain(t *testing.T) {
	be := backend(t)
	g := be.NewGraph()
	defer g.Close()
	x := g.Input([]float32{1, 2, 3}, 3)
	y := x.Scale(2).Add(g.Input([]float32{1, 1, 1}, 3))
	got, err := g.Compute(y)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "first", got, []float32{3, 5, 7})
	if !g.Current() {
		t.Fatal("a graph just computed is not current")
	}
	if err := g.SetInput(x, []float32{10, 20, 30}); err != nil {
		t.Fatal(err)
	}
	if got, err = g.Compute(y); err != nil {
		t.Fatal(err)
	}
	near(t, "again", got, []float32{21, 41, 61})
	if err := g.SetInput(x, []float32{1}); err == nil {
		t.Error("an input of the wrong size was taken")
	}

	other := be.NewGraph()
	big := make([]float32, 1<<20)
	if _, err := other.Compute(other.Input(big, len(big)).Scale(3)); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if g.Current() {
		t.Fatal("a graph is current after another was computed")
	}
	if _, err := g.Compute(y); err == nil {
		t.Error("a graph computed again after another one")
	}
}

// TestUnsqueeze: a slice of per-item vectors viewed with a dimension of one
// inserted broadcasts over that dimension, without a copy.
func TestUnsqueeze(t *testing.T) {
	be := backend(t)
	g := be.NewGraph()
	defer g.Close()
	mod := g.Input([]float32{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}, 6, 2) // [6, n=2]
	piece := mod.Slice(0, 2, 4).Unsqueeze(1)                                  // [2, 1, 2]: 3, 4 and 30, 40
	if got := [4]int{piece.Dim(0), piece.Dim(1), piece.Dim(2), piece.Dim(3)}; got != [4]int{2, 1, 2, 1} {
		t.Fatalf("shape %v", got)
	}
	x := g.Input([]float32{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, 2, 3, 2) // [2, tokens=3, n=2]
	got, err := g.Compute(x.Mul(piece))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "product", got, []float32{3, 4, 6, 8, 9, 12, 30, 40, 60, 80, 90, 120})
}

// TestFusedWeights: matrices loaded side by side give one product whose
// rows are each one's product, each part is still a weight of its own, and
// a fusion of what does not fit is refused with the tensor's name.
func TestFusedWeights(t *testing.T) {
	be := backend(t)
	path := filepath.Join(t.TempDir(), "w.gguf")
	matrix := func(name string, in, out int, first float32) gguf.Tensor {
		v := make([]float32, in*out)
		for i := range v {
			v[i] = first + float32(i)
		}
		var b bytes.Buffer
		_ = binary.Write(&b, binary.LittleEndian, v)
		return gguf.Tensor{Name: name, Type: gguf.TensorF32, Shape: []uint64{uint64(in), uint64(out)}, Data: &b}
	}
	writeGGUF(t, path, []gguf.Tensor{matrix("a", 2, 3, 1), matrix("b", 2, 1, 100), matrix("c", 3, 1, 0)})
	w, err := be.LoadWeights(path, nil, Layout{Fusions: []Fusion{{Name: "ab", Parts: []string{"a", "b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	g := be.NewGraph()
	defer g.Close()
	x := g.Input([]float32{1, 2}, 2)
	outs, err := g.ComputeAll(g.Weight(w, "ab").MulMat(x), g.Weight(w, "a").MulMat(x), g.Weight(w, "b").MulMat(x))
	if err != nil {
		t.Fatal(err)
	}
	// a's rows (1,2) (3,4) (5,6) and b's (100,101), each times (1, 2)
	near(t, "fused", outs[0], []float32{5, 11, 17, 302})
	near(t, "a", outs[1], []float32{5, 11, 17})
	near(t, "b", outs[2], []float32{302})

	for _, bad := range []Fusion{{Name: "x", Parts: []string{"a", "missing"}}, {Name: "x", Parts: []string{"a", "c"}}} {
		if _, err := be.LoadWeights(path, nil, Layout{Fusions: []Fusion{bad}}); err == nil || !strings.Contains(err.Error(), bad.Parts[1]) {
			t.Errorf("fusion %v: error %v, want one naming %s", bad.Parts, err, bad.Parts[1])
		}
	}
}

// TestBFloat16Matrices: the float16 matrices Layout.BFloat16 names are
// multiplied as bfloat16 (a value float16 holds and bfloat16 does not
// comes out rounded), a fusion by its name; the others keep float16.
func TestBFloat16Matrices(t *testing.T) {
	be := backend(t)
	path := filepath.Join(t.TempDir(), "w.gguf")
	// 1 + 1/1024 is float16 0x3c01; bfloat16's nearest is 1.
	writeHalfMatrices(t, path, "narrowed", []uint16{0x3c01, 0x3c01})
	w, err := be.LoadWeights(path, nil, Layout{
		Fusions:  []Fusion{{Name: "pq", Parts: []string{"p", "q"}}},
		BFloat16: func(name string) bool { return name == "narrowed" || name == "pq" },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	g := be.NewGraph()
	defer g.Close()
	x := g.Input([]float32{1, 0}, 2)
	// The last is tokens times the matrix, the operands the other way
	// round (TokensAlongRows): ggml multiplies a bfloat16 right operand
	// only by a bfloat16 matrix, so MulMat converts the tokens.
	outs, err := g.ComputeAll(g.Weight(w, "kept").MulMat(x), g.Weight(w, "narrowed").MulMat(x), g.Weight(w, "pq").MulMat(x),
		g.Input([]float32{1, 0, 0, 3}, 2, 2).MulMat(g.Weight(w, "narrowed")))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "float16", outs[0], []float32{1 + 1.0/1024})
	near(t, "bfloat16", outs[1], []float32{1})
	near(t, "fused bfloat16", outs[2], []float32{1, 1, 1})
	near(t, "tokens times bfloat16", outs[3], []float32{1, 3})
}

// writeHalfMatrices writes a GGUF file at path of float16 matrices each
// row of which is row: "kept" and changed, one row each, and "p" and
// "q", of one row and two, to be fused.
func writeHalfMatrices(t *testing.T, path, changed string, row []uint16) {
	t.Helper()
	half := func(name string, rows int) gguf.Tensor {
		var b bytes.Buffer
		for range rows {
			_ = binary.Write(&b, binary.LittleEndian, row)
		}
		return gguf.Tensor{Name: name, Type: gguf.TensorF16, Shape: []uint64{uint64(len(row)), uint64(rows)}, Data: &b}
	}
	writeGGUF(t, path, []gguf.Tensor{half("kept", 1), half(changed, 1), half("p", 1), half("q", 2)})
}

// TestFloat32Matrices: float16 matrices widened at load (Layout.Float32),
// one alone and one fused, are float32 tensors holding the file's values
// exactly, in products as in the float16 ones.
func TestFloat32Matrices(t *testing.T) {
	be := backend(t)
	path := filepath.Join(t.TempDir(), "w.gguf")
	// 1 + 1/1024, the largest float16, the smallest subnormal, and −2.
	bits := []uint16{0x3c01, 0x7bff, 0x0001, 0xc000}
	want := []float32{1 + 1.0/1024, 65504, 0x1p-24, -2}
	writeHalfMatrices(t, path, "widened", bits)
	w, err := be.LoadWeights(path, nil, Layout{
		Fusions: []Fusion{{Name: "pq", Parts: []string{"p", "q"}}},
		Float32: func(name string) bool { return name == "widened" || name == "pq" },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, typ := range map[string]int32{"kept": typeF16, "widened": typeF32, "pq": typeF32, "q": typeF32} {
		if got := (*header)(w.byName[name]).typ; got != typ {
			t.Errorf("%s is of type %d, want %d", name, got, typ)
		}
	}
	for i := range 4 { // the products with each column of the identity
		g := be.NewGraph()
		x := make([]float32, 4)
		x[i] = 1
		in := g.Input(x, 4)
		o, err := g.ComputeAll(g.Weight(w, "kept").MulMat(in), g.Weight(w, "widened").MulMat(in), g.Weight(w, "pq").MulMat(in))
		g.Close()
		if err != nil {
			t.Fatal(err)
		}
		if o[0][0] != want[i] || o[1][0] != want[i] || !slices.Equal(o[2], []float32{want[i], want[i], want[i]}) {
			t.Errorf("value %d: float16 %v, widened %v, fused %v, want %v", i, o[0], o[1], o[2], want[i])
		}
	}
}

// TestFloat16ToBFloat16 rounds to the nearest, ties to even, and keeps
// the float16 values bfloat16 holds.
func TestFloat16ToBFloat16(t *testing.T) {
	for _, c := range []struct {
		half, want uint16
		what       string
	}{
		{0x3c00, 0x3f80, "1"},
		{0xbc00, 0xbf80, "-1"},
		{0x0000, 0x0000, "0"},
		{0x8000, 0x8000, "-0"},
		{0x0001, 0x3380, "the least subnormal, 2⁻²⁴"},
		{0x3c04, 0x3f80, "1 + 4/1024: a tie, to the even 1"},
		{0x3c0c, 0x3f82, "1 + 12/1024: a tie, to the even 1 + 2/128"},
		{0x3c05, 0x3f81, "1 + 5/1024: above the tie, up"},
		{0x7bff, 0x4780, "65504 rounds up to 65536"},
		{0x7c00, 0x7f80, "+Inf"},
	} {
		v := []uint16{c.half}
		float16ToBFloat16(v)
		if v[0] != c.want {
			t.Errorf("%s: float16 %#04x became %#04x, want %#04x", c.what, c.half, v[0], c.want)
		}
	}
	nan := []uint16{0x7e00}
	float16ToBFloat16(nan)
	if f := math.Float32frombits(uint32(nan[0]) << 16); f == f {
		t.Errorf("NaN became %#04x, not a NaN", nan[0])
	}
	// Every value, in one call of several chunks, as the table has it.
	all := make([]uint16, 3<<20)
	for i := range all {
		all[i] = uint16(i * 7919)
	}
	want := make([]uint16, len(all))
	for i, h := range all {
		want[i] = bfloat16Table()[h]
	}
	float16ToBFloat16(all)
	if !slices.Equal(all, want) {
		t.Error("converting in chunks differs from one value at a time")
	}
}

// TestRowSums: rows long enough to be summed in parts (for CUDA), and
// short ones, against the sums in Go.
func TestRowSums(t *testing.T) {
	be := backend(t)
	be.forCUDA = true
	defer func() { be.forCUDA = false }()
	for _, shape := range [][2]int{{1 << 16, 3}, {3 << 13, 5}, {7, 2}} {
		k, rows := shape[0], shape[1]
		x := make([]float32, k*rows)
		want := make([]float32, rows)
		for i := range x {
			x[i] = float32(i%7) - 3 + float32(i/k)
			want[i/k] += x[i]
		}
		g := be.NewGraph()
		got, err := g.Compute(g.Input(x, k, rows).RowSums())
		g.Close()
		if err != nil {
			t.Fatal(err)
		}
		nearWithin(t, fmt.Sprintf("%d rows of %d", rows, k), got, want, 1e-6)
	}
}

// TestDerivedWeights: weights computed once from the loaded ones are
// weights of their own, their values kept, for graphs after.
func TestDerivedWeights(t *testing.T) {
	be := backend(t)
	path := filepath.Join(t.TempDir(), "w.gguf")
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, []float32{1, 2, 3, 4, 5, 6}) // rows (1,2) (3,4) (5,6)
	writeGGUF(t, path, []gguf.Tensor{{Name: "m", Type: gguf.TensorF32, Shape: []uint64{2, 3}, Data: &b}})
	w, err := be.LoadWeights(path, nil, Layout{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = w.Derive(func(g *Graph) ([]string, []Tensor) {
		m := g.Weight(w, "m")
		return []string{"m·(1,1)", "2m"}, []Tensor{m.MulMat(g.Input([]float32{1, 1}, 2)), m.Scale(2)}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Derive(func(g *Graph) ([]string, []Tensor) { return []string{"one"}, nil }); err == nil {
		t.Error("a derivation of no tensor for one name was taken")
	}
	g := be.NewGraph()
	defer g.Close()
	outs, err := g.ComputeAll(g.Weight(w, "m·(1,1)").Scale(10), g.Weight(w, "2m"))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "product", outs[0], []float32{30, 70, 110})
	near(t, "scaled", outs[1], []float32{2, 4, 6, 8, 10, 12})
}

// writeGGUF writes tensors to a GGUF file at path.
func writeGGUF(t *testing.T, path string, tensors []gguf.Tensor) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = gguf.Write(f, nil, tensors)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestBLASBackend: with ggml's BLAS backend, a graph's matrix products
// (a product of a batch, and attention's two) run on it and the rest on
// the CPU, and give what ggml's own kernels give; the backend stays out
// of ggml's registry, where the text engine would find it; and OpenBLAS
// runs the kernels it picks for the CPU, not an inherited
// OPENBLAS_CORETYPE.
func TestBLASBackend(t *testing.T) {
	plain := backend(t)
	be := blasBackend(t)
	if !strings.HasPrefix(be.Device().BLAS, "OpenBLAS ") {
		t.Errorf("device's BLAS %q", be.Device().BLAS)
	}
	c := newAttentionCase(64, 2, 40, 50, 2)
	w, x := make([]float32, 64*48), make([]float32, 64*40*2)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	for i := range x {
		x[i] = float32(math.Cos(float64(i) / 3))
	}
	compute := func(be *Backend) ([][]float32, *Graph) {
		g := be.NewGraph()
		t.Cleanup(g.Close)
		prod := g.Input(w, 64, 48).MulMat(g.Input(x, 64, 40, 2)).Add(g.Input([]float32{1}, 1))
		size := c.d * c.heads
		q := g.Input(c.q, size, c.nq, c.n).Queries(g.Input(c.bias, size), c.heads)
		att := q.Attend(AttentionKeys(g.Input(c.k, size, c.nk, c.n), g.Input(c.v, size, c.nk, c.n), c.nk, c.heads), 0.125)
		outs, err := g.ComputeAll(prod, att)
		if err != nil {
			t.Fatal(err)
		}
		return outs, g
	}
	want, _ := compute(plain)
	got, g := compute(be)
	near(t, "product", got[0], want[0])
	nearWithin(t, "attention", got[1], want[1], 1e-3)
	nearWithin(t, "attention, written out", got[1], c.want(0.125), 2e-3)
	onBLAS := 0
	for _, r := range g.runs {
		if r.backend == be.blas.backend {
			onBLAS += int(be.a.graphNodes(r.graph))
		}
	}
	if onBLAS != 3 {
		t.Errorf("%d operations on the BLAS backend, want the 3 products", onBLAS)
	}
	for i := range be.a.devCount() {
		if name := be.a.devName(be.a.devGet(i)); strings.Contains(strings.ToUpper(name), "BLAS") {
			t.Errorf("ggml's registry has the device %s", name)
		}
	}
	if inherited := os.Getenv("OPENBLAS_CORETYPE"); inherited != "" && strings.Contains(be.Device().BLAS, inherited) {
		t.Errorf("OpenBLAS runs the inherited OPENBLAS_CORETYPE %s", inherited)
	}
}

// TestBFloat16ProductsOnTheCPUKernels: beside the BLAS backend, a product
// with a bfloat16 matrix runs on the CPU's kernels where they multiply
// bfloat16 natively, and through sgemm (the matrix widened) where not.
func TestBFloat16ProductsOnTheCPUKernels(t *testing.T) {
	be := blasBackend(t)
	w, x := make([]float32, 64*48), make([]float32, 64*40)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	for i := range x {
		x[i] = float32(math.Cos(float64(i) / 3))
	}
	for _, native := range []bool{true, false} {
		be.device.NativeBFloat16 = native
		g := be.NewGraph()
		in := g.Input(w, 64, 48)
		// And tokens times the matrix: 40 rows, padded to 48 for
		// llamafile's kernel (MulMat), their product's rows apart.
		tokens := g.Input(x, 64, 40)
		outs, err := g.ComputeAll(in.cast(typeBF16).MulMat(tokens), in.MulMat(tokens), tokens.MulMat(in.cast(typeBF16)), tokens.MulMat(in))
		if err != nil {
			t.Fatal(err)
		}
		nearWithin(t, "bfloat16 product", outs[0], outs[1], 3e-2)
		nearWithin(t, "tokens times bfloat16", outs[2], outs[3], 3e-2)
		onBLAS := 0
		for _, r := range g.runs {
			if r.backend == be.blas.backend {
				onBLAS += int(be.a.graphNodes(r.graph))
			}
		}
		if want := map[bool]int{true: 2, false: 3}[native]; onBLAS != want { // the float32 ones, and the bfloat16 matrix where not native
			t.Errorf("native bfloat16 %v: %d products on the BLAS backend, want %d", native, onBLAS, want)
		}
		g.Close()
	}
}

// TestCPUFeatures: the CPU's feature list comes from its ggml kernels, and
// they are never said to multiply bfloat16 natively on a CPU without
// AVX512_BF16.
func TestCPUFeatures(t *testing.T) {
	be := backend(t)
	features := be.a.features(be.a.devBackendReg(be.a.devByType(devCPU)))
	t.Logf("ggml's CPU features: %v; native bfloat16: %v", features, be.Device().NativeBFloat16)
	if runtime.GOARCH == "amd64" && len(features) == 0 {
		t.Error("no features listed for an x86-64 CPU")
	}
	if be.Device().NativeBFloat16 && !cpu.X86.HasAVX512BF16 {
		t.Error("native bfloat16 on a CPU without AVX512_BF16")
	}
}

// blasBackend is a one-thread CPU backend with ggml's BLAS backend beside
// it, closed when the test ends; the test is skipped where the engine has
// no BLAS module.
func blasBackend(t *testing.T) *Backend {
	t.Helper()
	if os.Getenv("LLAMA_LIB_DIR") == "" {
		t.Skip("LLAMA_LIB_DIR is unset (make engine)")
	}
	be, err := Open(Options{Device: DeviceCPU, Threads: 1, BLAS: BLASOn})
	if errors.Is(err, errNoBLAS) {
		t.Skip("the engine has no BLAS module (OpenBLAS was not installed when make engine built it)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	return be
}
