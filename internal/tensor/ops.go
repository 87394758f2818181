package tensor

import (
	"fmt"
	"unsafe"
)

func (t Tensor) op(r unsafe.Pointer) Tensor { return Tensor{t.g, r} }

// Add is t + u, u broadcast over t.
func (t Tensor) Add(u Tensor) Tensor { return t.op(t.g.be.a.add(t.g.ctx, t.t, u.t)) }

// Mul is t × u element-wise, u broadcast over t.
func (t Tensor) Mul(u Tensor) Tensor { return t.op(t.g.be.a.mul(t.g.ctx, t.t, u.t)) }

// MulMat is ggml_mul_mat(t, u): the products of t's rows with u's rows.
//
// A matrix t times a contiguous batch u is one product over the batch's
// rows together, not one per item: a BLAS library packs the matrix into
// its panels at every call (OpenBLAS's sgemm: a tenth of its time at
// SD3's shapes on one core), so one call packs it once.
func (t Tensor) MulMat(u Tensor) Tensor {
	if (*header)(u.t).typ == typeBF16 && (*header)(t.t).typ == typeF32 {
		// ggml multiplies a bfloat16 right operand by a matrix of its own
		// type only (tokens times a bfloat16 matrix, TokensAlongRows).
		if rows := t.Dim(1); rows%tileRows != 0 && t.Dim(2) == 1 && t.Dim(3) == 1 && !t.g.be.forCUDA {
			return t.zeroRowsTo(tileRows).cast(typeBF16).MulMat(u).firstRows(rows)
		}
		t = t.cast(typeBF16)
	}
	if t.Dim(2) == 1 && t.Dim(3) == 1 && u.Dim(2)*u.Dim(3) > 1 && u.contiguous() {
		rows, n, m := u.Dim(1), u.Dim(2), u.Dim(3)
		y := t.op(t.g.be.a.mulMat(t.g.ctx, t.t, u.Reshape(u.Dim(0), rows*n*m).t))
		return y.Reshape(t.Dim(1), rows, n, m)
	}
	return t.op(t.g.be.a.mulMat(t.g.ctx, t.t, u.t))
}

// tileRows is the multiple of rows of a product's matrix that the CPU's
// llamafile kernel takes in its largest tiles (on AVX-512; other rows
// counts that are a multiple of 4 take smaller ones). It takes no other
// count, and ggml's generic loop, which then runs the product, is about
// a third as fast: a matrix with other rows is padded with zero rows,
// and the product's values for them left out (firstRows).
const tileRows = 16

// zeroRowsTo is t [n, rows] with zero rows after its own, in its type, up
// to a multiple of m rows: a matrix as llamafile's kernel takes it
// (tileRows). t itself where it has such a multiple.
func (t Tensor) zeroRowsTo(m int) Tensor {
	rows := t.Dim(1)
	if rows%m == 0 {
		return t
	}
	zeros := t.g.Zeros(t.Dim(0), m-rows%m)
	if typ := (*header)(t.t).typ; typ != typeF32 {
		zeros = zeros.cast(typ)
	}
	return t.Concat(zeros, 1)
}

// firstRows views the first rows values of each of t's rows, [rows,
// ne1, ne2, ne3], its rows apart.
func (t Tensor) firstRows(rows int) Tensor {
	h := (*header)(t.t)
	return t.view([4]int{rows, t.Dim(1), t.Dim(2), t.Dim(3)}, [3]int{int(h.nb[1]), int(h.nb[2]), int(h.nb[3])}, 0)
}

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
	if h := (*header)(t.t); t.g.be.forCUDA && h.typ == typeF32 && h.nb[0] == 4 && h.ne[0]*h.ne[1]*h.ne[2]*h.ne[3] < 1<<31 {
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

// Transposed is t [a, b, n] laid out as [b, a, n], each of its n
// matrices transposed: on the CPU as a product with the identity, far
// cheaper there than ggml's copy of a permuted tensor, one value at a
// time; for CUDA by adding zero (Contiguous), one pass where the product
// is a float32 matrix product.
func (t Tensor) Transposed() Tensor {
	if t.g.be.forCUDA {
		return t.Permute(1, 0, 2, 3).Contiguous()
	}
	return t.MulMat(t.g.Identity(t.Dim(0), t.Dim(2)))
}

// RowSums is the sum of each row of t [k, rows], [rows]: products with
// ones (ggml's row sum adds one value at a time on the CPU), with t the
// matrix. ggml-cuda's matrix-vector kernel gives each row a block of
// threads, so for CUDA a few long rows (GroupNorm's: 32 of 4 million
// values at 1024²) are first cut into parts, whose sums are then summed.
func (t Tensor) RowSums() Tensor {
	k, rows := t.Dim(0), t.Dim(1)
	parts := 1
	for t.g.be.forCUDA && rows*parts < 4096 && k%(2*parts) == 0 && k/(2*parts) >= 4096 {
		parts *= 2
	}
	sums := t.Reshape(k/parts, rows*parts).MulMat(t.g.Ones(k / parts))
	if parts > 1 {
		sums = sums.Reshape(parts, rows).MulMat(t.g.Ones(parts))
	}
	return sums.Reshape(rows)
}

// RowsOf is the vector t [D] as rows rows deep, [rows, D]: each of its
// values a row of rows copies, the layout of a bias for values with their
// tokens along rows (TokensAlongRows). An outer product with ones, a row
// at a time (ggml's repeat copies one value at a time from so short a
// row).
func (t Tensor) RowsOf(rows int) Tensor {
	ones := t.g.Ones(rows).Reshape(rows, 1)
	return t.op(t.g.be.a.outProd(t.g.ctx, ones.t, t.Reshape(t.Dim(0), 1).t))
}

// GroupSums is, for t [C, pixels, n] channels-last, the sums of each
// group of C/groups consecutive channels over the pixels, and of their
// squares: [groups·n] each. On the CPU each channel's sums are an outer
// product with ones (ggml_out_prod, which adds a pixel's channels at a
// time, in vectors), then each group's a row sum of a few channels; for
// CUDA the groups are rows of t transposed (Transposed), summed as rows.
func (t Tensor) GroupSums(groups int) (sums, squares Tensor) {
	c, pixels, n := t.Dim(0), t.Dim(1), t.Dim(2)
	per := c / groups
	if t.g.be.forCUDA {
		rows := t.Transposed().Reshape(pixels*per, groups*n) // a row a group
		return rows.RowSums(), rows.Sqr().RowSums()
	}
	ones := t.g.Ones(pixels*n).Reshape(1, pixels, n)
	channels := func(t Tensor) Tensor { // [C, 1, n] to [groups·n]
		return t.op(t.g.be.a.outProd(t.g.ctx, t.t, ones.t)).Reshape(per, groups*n).RowSums()
	}
	return channels(t), channels(t.Sqr())
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
// x·(1 + tanh(z))/2 with z = c·(x + 0.044715x³), c = √(2/π): ggml's
// kernel, one pass. CUDA's computes it exactly; the CPU's, in the
// pinned release, read a float16 table (an error that grows through a
// model's layers) or the C library's tanh a value at a time, and the
// engine's patch 0004 (scripts/llama-patches) computes it as x·σ(2z) in
// vectors, as exactly.
func (t Tensor) GELUTanh() Tensor { return t.op(t.g.be.a.gelu(t.g.ctx, t.t)) }

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
	x3 := xp.strided(0, [4]int{cin, 3, pw, r}, [4]int{f32, pw * cin * f32, cin * f32, pw * cin * f32})
	// With a float16 or bfloat16 kernel, the CPU's product takes its other
	// operand in the kernel's type too: the copy that interleaves the rows
	// converts them, at half the bytes, and the product reads the windows
	// as they are.
	es := f32
	if typ := (*header)(t.t).typ; (typ == typeF16 || typ == typeBF16) && !t.g.be.forCUDA {
		x3, es = x3.cast(typ), 2
	} else {
		x3 = x3.Contiguous()
	}
	// A window is then 9·Cin consecutive values, (kw, kh, channel), and the
	// kernel [Cin, 3 (kh), 3 (kw), Cout] one matrix of 9·Cin rows. On the
	// CPU a kernel of another number of outputs than llamafile's kernel
	// takes (a multiple of 4, tileRows) gets zero outputs to make one up:
	// the VAE's last convolution, 3 outputs, ran on ggml's generic loop.
	k := t.Permute(2, 1, 0, 3).Contiguous().Reshape(9*cin, cout)
	if !t.g.be.forCUDA {
		k = k.zeroRowsTo(4)
	}
	ck := k.Dim(1)
	rows := r*pw - 2
	y := k.MulMat(x3.overlappingRows(0, 9*cin, rows, 3*cin*es, es)) // [Cout, rows]
	return y.view([4]int{cout, w, h, n}, [3]int{ck * f32, pw * ck * f32, pw * ph * ck * f32}, 0)
}

// overlappingRows views rows rows of rowLen values of t, es bytes each,
// from byte offset on, each stride bytes after the last: rows that
// overlap when stride is less than a row.
func (t Tensor) overlappingRows(offset, rowLen, rows, stride, es int) Tensor {
	return t.strided(offset, [4]int{rowLen, rows, 1, 1}, [4]int{es, stride, stride * rows, stride * rows})
}

// strided views t's data from byte offset on with shape ne and
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
