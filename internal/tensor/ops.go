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
