package tensor

import (
	"fmt"
	"math"
	"unsafe"
)

func (t Tensor) op(r unsafe.Pointer) Tensor { return Tensor{t.g, r} }

// Add is t + u, u broadcast over t.
func (t Tensor) Add(u Tensor) Tensor { return t.op(t.g.be.a.add(t.g.ctx, t.t, u.t)) }

// Mul is t × u element-wise, u broadcast over t.
func (t Tensor) Mul(u Tensor) Tensor { return t.op(t.g.be.a.mul(t.g.ctx, t.t, u.t)) }

// MulMat is ggml_mul_mat(t, u): the products of t's rows with u's rows.
func (t Tensor) MulMat(u Tensor) Tensor { return t.op(t.g.be.a.mulMat(t.g.ctx, t.t, u.t)) }

// Scale is t × s.
func (t Tensor) Scale(s float64) Tensor { return t.op(t.g.be.a.scale(t.g.ctx, t.t, float32(s))) }

// Norm normalizes each row to zero mean and unit variance.
func (t Tensor) Norm(eps float32) Tensor { return t.op(t.g.be.a.norm(t.g.ctx, t.t, eps)) }

// SILU is x·sigmoid(x).
func (t Tensor) SILU() Tensor { return t.op(t.g.be.a.silu(t.g.ctx, t.t)) }

// SoftMax is the softmax of each row.
func (t Tensor) SoftMax() Tensor { return t.op(t.g.be.a.softMax(t.g.ctx, t.t)) }

// Contiguous lays t out in order. On CUDA a float32 t whose rows are
// contiguous is laid out by adding zero: ggml's copy kernel for permuted
// and strided views works out each value's place with 64-bit divisions,
// which ran at 0.4 TB/s on an H100, and its element-wise kernels read
// strided operands with a thread per row value, at 1.4 to 1.7 TB/s
// (docs/benchmarks-gpu.md). x + 0 is x for every x but −0. Past 2³¹
// values the copy kernel does it: the element-wise kernel indexes in 32
// bits.
func (t Tensor) Contiguous() Tensor {
	if h := (*header)(t.t); t.g.be.addToLayOut && h.typ == typeF32 && h.nb[0] == 4 && h.ne[0]*h.ne[1]*h.ne[2]*h.ne[3] < 1<<31 {
		return t.Add(t.g.zero())
	}
	return t.op(t.g.be.a.cont(t.g.ctx, t.t))
}

// Reshape views t with shape ne; a t whose values are not in order
// (a permuted or strided view) is laid out in order first.
func (t Tensor) Reshape(ne ...int) Tensor {
	if !t.contiguous() {
		t = t.Contiguous()
	}
	d := dims(ne)
	return t.op(t.g.be.a.reshape4d(t.g.ctx, t.t, d[0], d[1], d[2], d[3]))
}

// contiguous reports whether t's values are in order, without gaps, as
// ggml_is_contiguous does.
func (t Tensor) contiguous() bool {
	h := (*header)(t.t)
	size := h.nb[0]
	for i := range h.ne {
		if h.ne[i] != 1 && h.nb[i] != size {
			return false
		}
		size *= uint64(h.ne[i])
	}
	return true
}

// SplitFirst views t's first dimension as two, [n, ne0/n, …], without
// copying; t's fourth dimension must be one.
func (t Tensor) SplitFirst(n int) Tensor {
	h := (*header)(t.t)
	if h.ne[3] != 1 || n <= 0 || h.ne[0]%int64(n) != 0 {
		panic(fmt.Sprintf("tensor: SplitFirst(%d) of a tensor of shape %v", n, h.ne))
	}
	return t.view([4]int{n, int(h.ne[0]) / n, int(h.ne[1]), int(h.ne[2])},
		[3]int{n * int(h.nb[0]), int(h.nb[1]), int(h.nb[2])}, 0)
}

// Unsqueeze views t with a dimension of one inserted at dim (1 to 3),
// without copying; t's fourth dimension must be one.
func (t Tensor) Unsqueeze(dim int) Tensor {
	h := (*header)(t.t)
	if h.ne[3] != 1 || dim < 1 || dim > 3 {
		panic(fmt.Sprintf("tensor: Unsqueeze(%d) of a tensor of shape %v", dim, h.ne))
	}
	var ne [4]int
	var nb [3]int // strides of dimensions 1 to 3
	for i, j := 0, 0; i < 4; i++ {
		if i == dim {
			ne[i] = 1
			if i < 3 {
				nb[i-1] = int(h.nb[j]) // any stride serves a dimension of one
			}
			continue
		}
		ne[i] = int(h.ne[j])
		if i > 0 {
			nb[i-1] = int(h.nb[j])
		}
		j++
	}
	if dim == 3 {
		nb[2] = int(h.nb[2]) * ne[2]
	}
	return t.view(ne, nb, 0)
}

// Permute moves dimension i to axes[i].
func (t Tensor) Permute(a0, a1, a2, a3 int) Tensor {
	return t.op(t.g.be.a.permute(t.g.ctx, t.t, int32(a0), int32(a1), int32(a2), int32(a3)))
}

// Conv2D convolves x [W, H, Cin, N] with the kernel t [KW, KH, Cin, Cout]
// (im2col and a matrix product: on the CPU faster than ggml's direct
// kernel, scripts/ggml-conv-bench.c).
func (t Tensor) Conv2D(x Tensor, s0, s1, p0, p1, d0, d1 int) Tensor {
	return t.op(t.g.be.a.conv2d(t.g.ctx, t.t, x.t, int32(s0), int32(s1), int32(p0), int32(p1), int32(d0), int32(d1)))
}

// UpscaleNearest resizes t to ne by nearest-neighbour sampling.
func (t Tensor) UpscaleNearest(ne [4]int) Tensor {
	return t.op(t.g.be.a.interpolate(t.g.ctx, t.t, int64(ne[0]), int64(ne[1]), int64(ne[2]), int64(ne[3]), 0))
}

// Slice is the view of t's indices [start, end) along dimension dim.
func (t Tensor) Slice(dim, start, end int) Tensor {
	h := (*header)(t.t)
	ne := h.ne
	ne[dim] = int64(end - start)
	return t.op(t.g.be.a.view4d(t.g.ctx, t.t, ne[0], ne[1], ne[2], ne[3],
		uintptr(h.nb[1]), uintptr(h.nb[2]), uintptr(h.nb[3]), uintptr(start)*uintptr(h.nb[dim])))
}

// Concat is t followed by u along dimension dim.
func (t Tensor) Concat(u Tensor, dim int) Tensor {
	return t.op(t.g.be.a.concat(t.g.ctx, t.t, u.t, int32(dim)))
}

// Sqr is x².
func (t Tensor) Sqr() Tensor { return t.op(t.g.be.a.sqr(t.g.ctx, t.t)) }

// Sqrt is √x.
func (t Tensor) Sqrt() Tensor { return t.op(t.g.be.a.sqrt(t.g.ctx, t.t)) }

// Sub is t − u, u broadcast over t.
func (t Tensor) Sub(u Tensor) Tensor { return t.op(t.g.be.a.sub(t.g.ctx, t.t, u.t)) }

// Repeat tiles t to shape ne, each dimension a multiple of t's.
func (t Tensor) Repeat(ne ...int) Tensor {
	d := dims(ne)
	return t.op(t.g.be.a.repeat4d(t.g.ctx, t.t, d[0], d[1], d[2], d[3]))
}

// Div is t ÷ u element-wise, u broadcast over t.
func (t Tensor) Div(u Tensor) Tensor { return t.op(t.g.be.a.div(t.g.ctx, t.t, u.t)) }

// ScaleBias is t × s + b.
func (t Tensor) ScaleBias(s, b float64) Tensor {
	return t.op(t.g.be.a.scaleBias(t.g.ctx, t.t, float32(s), float32(b)))
}

// Sigmoid is 1/(1+e^−x).
func (t Tensor) Sigmoid() Tensor { return t.op(t.g.be.a.sigmoid(t.g.ctx, t.t)) }

// GELUErf is GELU computed with erf (torch's default GELU).
func (t Tensor) GELUErf() Tensor { return t.op(t.g.be.a.geluErf(t.g.ctx, t.t)) }

// GELUTanh is GELU's tanh approximation (torch's approximate="tanh"),
// x·(1 + tanh(z))/2 with z = c·(x + 0.044715x³), c = √(2/π). CUDA's
// kernel computes it exactly, in one pass. ggml's CPU kernel reads a
// float16 table, an error that grows through a model's layers, and its
// tanh is the C library's, one value at a time; so on the CPU it is
// x·σ(2z), and since 2z = x·b with b = 2c·(1 + 0.044715x²) > 0,
// SiLU(x·b)/b: SiLU is one of ggml's vectorised kernels, and nothing
// divides by x. That is five passes over x, which on a GPU cost an SD3
// image a tenth of its time.
func (t Tensor) GELUTanh() Tensor {
	if t.g.be.device.Kind == DeviceCUDA {
		return t.op(t.g.be.a.gelu(t.g.ctx, t.t))
	}
	c2 := 2 * math.Sqrt(2/math.Pi)
	b := t.Sqr().ScaleBias(c2*0.044715, c2)
	return t.Mul(b).SILU().Div(b)
}

// RMSNorm divides each row by its root mean square.
func (t Tensor) RMSNorm(eps float32) Tensor { return t.op(t.g.be.a.rmsNorm(t.g.ctx, t.t, eps)) }

// GetRows gathers t's rows (its second dimension) at ids, int32; float16
// rows come back as float32.
func (t Tensor) GetRows(ids Tensor) Tensor { return t.op(t.g.be.a.getRows(t.g.ctx, t.t, ids.t)) }

// SoftMaxMasked is the softmax of each row of t·scale + mask, the mask
// [columns, rows] broadcast over t's outer dimensions.
func (t Tensor) SoftMaxMasked(mask Tensor, scale float64) Tensor {
	return t.op(t.g.be.a.softMaxEx(t.g.ctx, t.t, mask.t, float32(scale), 0))
}

// view is t's data seen with shape ne, byte strides nb (of dimensions 1 to
// 3) and a byte offset: rows may overlap.
func (t Tensor) view(ne [4]int, nb [3]int, offset int) Tensor {
	return t.op(t.g.be.a.view4d(t.g.ctx, t.t, int64(ne[0]), int64(ne[1]), int64(ne[2]), int64(ne[3]),
		uintptr(nb[0]), uintptr(nb[1]), uintptr(nb[2]), uintptr(offset)))
}

// Conv3x3ChannelsLast convolves x [Cin, W, H, N], channels-last, with the
// 3×3 kernel t [3, 3, Cin, Cout], stride 1, padding 1, without im2col, and
// returns a channels-last [Cout, W, H, N] view (its rows apart: take it
// Contiguous, or let the next operation read it). x is padded, and the
// three image rows a window covers are interleaved a pixel at a time (one
// copy, a channel row at a time), so that a pixel's whole 3×3 window is
// 9·Cin consecutive values: a view whose rows overlap, one row a pixel, is
// then the right operand of a single matrix product with the kernel. The
// product also computes two columns of padding per image row, which the
// view skips. im2col would gather every row from Cin planes apart, one
// value at a time, and the product's rows would be as long.
func (t Tensor) Conv3x3ChannelsLast(x Tensor) Tensor {
	cin, w, h, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	cout := t.Dim(3)
	pw, ph := w+2, h+3 // one column each side; one row above, two below so the last rows' reads stay inside
	// x goes into zeros, a row of Cin at a time: ggml's pad copies one
	// value at a time.
	const f32 = 4
	xp := x.shaped([4]int{cin, pw, ph, n}).fill(0).accumulate(x, [3]int{cin * f32, pw * cin * f32, pw * ph * cin * f32}, (pw+1)*cin*f32)
	// The three image rows a window covers, interleaved a pixel at a time:
	// [Cin, 3 (kh), W+2, rows], rows counted across the images (those that
	// cross from one image into the next are computed and dropped).
	r := n*ph - 2
	x3 := xp.strided(0, [4]int{cin, 3, pw, r}, [4]int{f32, pw * cin * f32, cin * f32, pw * cin * f32}).Contiguous()
	// A window is then 9·Cin consecutive values, (kw, kh, channel), and the
	// kernel [Cin, 3 (kh), 3 (kw), Cout] one matrix of 9·Cin rows.
	k := t.Permute(2, 1, 0, 3).Contiguous().Reshape(9*cin, cout)
	rows := r*pw - 2
	y := k.MulMat(x3.overlappingRows(0, 9*cin, rows, 3*cin*f32)) // [Cout, rows]
	return y.view([4]int{cout, w, h, n}, [3]int{cout * f32, pw * cout * f32, pw * ph * cout * f32}, 0)
}

// overlappingRows views rows rows of rowLen values of t, from byte offset
// on, each stride bytes after the last: rows that overlap when stride is
// less than a row.
func (t Tensor) overlappingRows(offset, rowLen, rows, stride int) Tensor {
	return t.strided(offset, [4]int{rowLen, rows, 1, 1}, [4]int{4, stride, stride * rows, stride * rows})
}

// strided views t's float32 data from byte offset on with shape ne and
// byte strides nb, which may overlap. ggml checks a view's size as if its
// rows were apart, so the view is made one value long and then given its
// shape and strides, in the public struct ggml_tensor's ne and nb; the
// bytes they reach (ggml_nbytes) stay inside t, as the caller ensures.
func (t Tensor) strided(offset int, ne, nb [4]int) Tensor {
	v := t.view([4]int{1, 1, 1, 1}, [3]int{4, 4, 4}, offset)
	h := (*header)(v.t)
	for i := range ne {
		h.ne[i], h.nb[i] = int64(ne[i]), uint64(nb[i])
	}
	return v
}

// shaped is a tensor of shape ne (float32, contiguous) for operations that
// read only their operand's shape, such as fill: a view of t's first value
// given that shape. Its data is not t's; nothing may read it.
func (t Tensor) shaped(ne [4]int) Tensor {
	nb := [4]int{4, 4 * ne[0], 4 * ne[0] * ne[1], 4 * ne[0] * ne[1] * ne[2]}
	return t.strided(0, ne, nb)
}

// fill is a new tensor of t's shape, every value c.
func (t Tensor) fill(c float32) Tensor { return t.op(t.g.be.a.fill(t.g.ctx, t.t, c)) }

// accumulate adds u into t in place, u's rows at offset with strides nb
// (bytes, of dimensions 1 to 3), and is t.
func (t Tensor) accumulate(u Tensor, nb [3]int, offset int) Tensor {
	return t.op(t.g.be.a.accIn(t.g.ctx, t.t, u.t, uintptr(nb[0]), uintptr(nb[1]), uintptr(nb[2]), uintptr(offset)))
}

// Attention is softmax(k·q·scale)·v per head: q [d, queries, heads, n], k
// and v [d, keys, heads, n], rows contiguous (permuted views are fine). The
// result is [d, heads, queries, n], possibly a strided view (Reshape lays
// it out). It is ggml's flash attention, without the scores in memory,
// where the device runs it: on CUDA with each head's queries in groups
// (groupedAttention), else with float32 keys and values (the CPU), else
// float16 ones; else, for a head width the device's kernel lacks, the two
// products with the scores between.
func (q Tensor) Attention(k, v Tensor, scale float64) Tensor {
	return q.AttentionPadded(k, v, q.Dim(1), k.Dim(1), scale)
}

// AttentionPadding is how many rows of padding AttentionPadded wants
// after queries queries and keys keys (0 and 0 where the device's
// attention takes them as they are): a caller that builds q, k and v by
// concatenation can pad a small part and spare a copy of the whole.
func (be *Backend) AttentionPadding(queries, keys int) (queryPad, keyPad int) {
	if be.groups <= 1 {
		return 0, 0
	}
	return roundUp(queries, be.groups) - queries, roundUp(keys, keyPadding) - keys
}

// AttentionPadded is Attention over the first queries rows of q and the
// first keys rows of k and v; the rows after them are padding, zeros, as
// AttentionPadding asks for. The result is [d, heads, queries, n].
func (q Tensor) AttentionPadded(k, v Tensor, queries, keys int, scale float64) Tensor {
	if groups := q.g.be.groups; groups > 1 {
		if o, ok := q.groupedAttention(k, v, queries, keys, scale, groups); ok {
			return o
		}
	}
	q, k, v = q.rows(queries), k.rows(keys), v.rows(keys)
	a := q.g.be.a
	flash := func(k, v Tensor) (Tensor, bool) {
		o := q.op(a.flashAttn(q.g.ctx, q.t, k.t, v.t, nil, float32(scale), 0, 0))
		return o, a.supportsOp(q.g.be.b, o.t)
	}
	if o, ok := flash(k, v); ok {
		return o
	}
	if o, ok := flash(k.cast(typeF16), v.cast(typeF16)); ok {
		return o
	}
	return q.attentionWithScores(k, v, scale)
}

// DefaultCUDAAttentionGroups is how many runs Attention splits each
// head's queries into on CUDA unless Options say otherwise.
const DefaultCUDAAttentionGroups = 8

// keyPadding is the multiple grouped attention pads its keys to: CUDA's
// flash attention takes its grouped path only for keys padded to its
// stride (FATTN_KQ_STRIDE).
const keyPadding = 256

// groupedAttention is Attention written as grouped-query attention, where
// several query heads share one head of keys and values. CUDA's flash
// attention kernel (ggml-cuda/fattn-mma-f16.cuh) loads its key and value
// tiles through a two-stage asynchronous pipeline only on that path (with
// a mask, and keys padded to its stride); for heads that share nothing it
// loads each tile synchronously, bound-checked, which on an H200 kept
// SD3's attention at 57 TFLOP/s. So each head's queries are split into
// groups runs, and run r of head h becomes query head r + groups·h, whose
// keys are head h's: the same scores, the same softmax, the same result.
// The first nq queries are padded to a multiple of groups (the padding's
// rows are computed and dropped) and the first nk keys and values to
// keyPadding, which the mask hides, unless the caller has padded them
// (AttentionPadding). On an H100 it took SD3's attention to 165 TFLOP/s.
// ok is false where the device cannot run it.
func (q Tensor) groupedAttention(k, v Tensor, nq, nk int, scale float64, groups int) (o Tensor, ok bool) {
	a := q.g.be.a
	d, heads, n, dv := q.Dim(0), q.Dim(2), q.Dim(3), v.Dim(0)
	run := (nq + groups - 1) / groups // queries a group
	qg := q.rows(run*groups).Reshape(d, run, groups*heads, n)
	kp, vp := k.rows(roundUp(nk, keyPadding)), v.rows(roundUp(nk, keyPadding))
	o = q.op(a.flashAttn(q.g.ctx, qg.t, kp.t, vp.t, q.g.keyMask(nk, run).t, float32(scale), 0, 0)) // [dv, groups·heads, run, n]
	if !a.supportsOp(q.g.be.b, o.t) {
		return Tensor{}, false
	}
	// Query i of head h is row i mod run of query head i/run + groups·h:
	// with the rows first, [dv, run, groups·heads, n] lays the queries of
	// each head out in order, [dv, runs·groups, heads, n].
	o = o.Permute(0, 2, 1, 3).Contiguous().Reshape(dv, run*groups, heads, n)
	return o.Slice(1, 0, nq).Permute(0, 2, 1, 3), true
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// rows is t [d, tokens, heads, n] with tokens rows: its first ones, or
// all of them followed by zeros. ggml's pad kernel gives each thread
// block 256 values of a row, and these rows are a head's 64, so the
// zeros come by concatenation.
func (t Tensor) rows(tokens int) Tensor {
	switch have := t.Dim(1); {
	case have > tokens:
		return t.Slice(1, 0, tokens)
	case have < tokens:
		return t.Concat(t.g.Zeros(t.Dim(0), tokens-have, t.Dim(2), t.Dim(3)), 1)
	}
	return t
}

// attentionWithScores is Attention as two matrix products with the
// softmax of the scores, [keys, queries, heads, n], between them.
func (q Tensor) attentionWithScores(k, v Tensor, scale float64) Tensor {
	scores := k.Contiguous().MulMat(q.Contiguous()).SoftMaxScaled(scale) // [keys, queries, heads, n]
	o := v.Permute(1, 0, 2, 3).Contiguous().MulMat(scores)               // [d, queries, heads, n]
	return o.Permute(0, 2, 1, 3).Contiguous()
}

// cast is t converted to the element type typ.
func (t Tensor) cast(typ int32) Tensor { return t.op(t.g.be.a.cast(t.g.ctx, t.t, typ)) }

// SoftMaxScaled is the softmax of each row of t·scale.
func (t Tensor) SoftMaxScaled(scale float64) Tensor {
	return t.op(t.g.be.a.softMaxEx(t.g.ctx, t.t, nil, float32(scale), 0))
}
