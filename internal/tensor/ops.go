package tensor

import "unsafe"

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

// Contiguous lays t out in order.
func (t Tensor) Contiguous() Tensor { return t.op(t.g.be.a.cont(t.g.ctx, t.t)) }

// Reshape views t with shape ne.
func (t Tensor) Reshape(ne ...int) Tensor {
	d := dims(ne)
	return t.op(t.g.be.a.reshape4d(t.g.ctx, t.t, d[0], d[1], d[2], d[3]))
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

// Pad appends p[i] zeros to the end of dimension i.
func (t Tensor) Pad(p0, p1, p2, p3 int) Tensor {
	return t.op(t.g.be.a.pad(t.g.ctx, t.t, int32(p0), int32(p1), int32(p2), int32(p3)))
}

// Sqr is x².
func (t Tensor) Sqr() Tensor { return t.op(t.g.be.a.sqr(t.g.ctx, t.t)) }

// Div is t ÷ u element-wise, u broadcast over t.
func (t Tensor) Div(u Tensor) Tensor { return t.op(t.g.be.a.div(t.g.ctx, t.t, u.t)) }

// ScaleBias is t × s + b.
func (t Tensor) ScaleBias(s, b float64) Tensor {
	return t.op(t.g.be.a.scaleBias(t.g.ctx, t.t, float32(s), float32(b)))
}

// Tanh is tanh(x).
func (t Tensor) Tanh() Tensor { return t.op(t.g.be.a.tanh(t.g.ctx, t.t)) }

// Sigmoid is 1/(1+e^−x).
func (t Tensor) Sigmoid() Tensor { return t.op(t.g.be.a.sigmoid(t.g.ctx, t.t)) }

// GELUErf is GELU computed with erf (torch's default GELU).
func (t Tensor) GELUErf() Tensor { return t.op(t.g.be.a.geluErf(t.g.ctx, t.t)) }

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

// SoftMaxScaled is the softmax of each row of t·scale.
func (t Tensor) SoftMaxScaled(scale float64) Tensor {
	return t.op(t.g.be.a.softMaxEx(t.g.ctx, t.t, nil, float32(scale), 0))
}

// View is t's data seen with shape ne, byte strides nb (of dimensions 1 to
// 3) and a byte offset: rows may overlap.
func (t Tensor) View(ne [4]int, nb [3]int, offset int) Tensor {
	return t.op(t.g.be.a.view4d(t.g.ctx, t.t, int64(ne[0]), int64(ne[1]), int64(ne[2]), int64(ne[3]),
		uintptr(nb[0]), uintptr(nb[1]), uintptr(nb[2]), uintptr(offset)))
}

// PadAround adds before[i] zeros before and after[i] after dimension i.
func (t Tensor) PadAround(before, after [4]int) Tensor {
	return t.op(t.g.be.a.padExt(t.g.ctx, t.t, int32(before[0]), int32(after[0]), int32(before[1]), int32(after[1]),
		int32(before[2]), int32(after[2]), int32(before[3]), int32(after[3])))
}

// Conv3x3 convolves x [W, H, Cin, N] with the 3×3 kernel t [3, 3, Cin,
// Cout], stride 1, padding 1, without im2col: x goes channels-last and
// padded, so that each pixel's row of three horizontal neighbours is 3·Cin
// consecutive values, and a view whose rows overlap feeds a matrix product
// per kernel row straight from it. The three products are summed; the two
// columns of padding per image row they also compute are dropped on the
// way back to [W, H, Cout, N]. On the CPU the product converts those rows
// to F16 in order, where im2col gathers them from Cin planes apart.
func (t Tensor) Conv3x3(x Tensor) Tensor {
	w, h, cin, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	cout := t.Dim(3)
	pw, ph := w+2, h+3                                                                         // one column each side; one row above, two below so the last rows' reads stay inside
	xc := x.Permute(1, 2, 0, 3).Contiguous().PadAround([4]int{0, 1, 1, 0}, [4]int{0, 1, 2, 0}) // [Cin, W+2, H+3, N]
	// kernel [Cin, 3 (kw), 3 (kh), Cout]: each (kh, o) row is kw-major, as a pixel's three neighbours are.
	k := t.Permute(1, 2, 0, 3).Contiguous()
	rows := pw*ph*n - 3*pw                  // flat output positions computed
	es, f32 := int((*header)(k.t).nb[0]), 4 // the kernel's element size; x is float32
	var y Tensor
	for kh := range 3 {
		kr := k.View([4]int{3 * cin, cout, 1, 1}, [3]int{9 * cin * es, 9 * cin * cout * es, 9 * cin * cout * es}, kh*3*cin*es) // [3·Cin, Cout]
		xr := xc.overlappingRows(kh*pw*cin*f32, 3*cin, rows, cin*f32)                                                          // [3·Cin, rows]
		p := kr.MulMat(xr)                                                                                                     // [Cout, rows]
		if kh == 0 {
			y = p
		} else {
			y = y.Add(p)
		}
	}
	// Back to [W, H, Cout, N], skipping the padding columns and rows.
	y = y.View([4]int{cout, w, h, n}, [3]int{cout * f32, pw * cout * f32, pw * ph * cout * f32}, 0)
	return y.Permute(2, 0, 1, 3).Contiguous()
}

// overlappingRows views rows rows of rowLen values of t, from byte offset
// on, each stride bytes after the last: rows that overlap when stride is
// less than a row. ggml checks a view's size as if its rows were apart, so
// the view is made one row long and then given its rows, in the public
// struct ggml_tensor's ne and nb; its bytes (ggml_nbytes) stay inside t,
// as the caller ensures.
func (t Tensor) overlappingRows(offset, rowLen, rows, stride int) Tensor {
	v := t.View([4]int{rowLen, 1, 1, 1}, [3]int{stride, stride, stride}, offset)
	h := (*header)(v.t)
	h.ne[1] = int64(rows)
	h.nb[2] = uint64(stride * rows)
	h.nb[3] = h.nb[2]
	return v
}
