package tensor

// Queries are an attention's queries laid out as the device's kernel
// reads them (Tensor.Queries), ready to Attend.
type Queries struct {
	op                       Tensor // [d, rows, groups·heads, n]: the kernel's query operand
	raw, bias                Tensor // as given: the fallback without the flash kernel starts from them
	d, heads, tokens, groups int
}

// Queries lays q [heads·d, tokens, n] out for attention, with bias
// [heads·d] added (the zero Tensor adds none). q is as a projection makes
// it, token by token, its rows possibly strided (a slice of a product of
// q, k and v together). The layout costs the one pass the bias's addition
// makes anyway.
//
// On CUDA each head's queries go in groups (Options.AttentionGroups).
// ggml-cuda's flash attention (fattn-mma-f16.cuh) loads its key and value
// tiles through a two-stage asynchronous pipeline only for grouped-query
// attention, where query heads share a head of keys and values (with a
// mask, and keys padded to its stride, KeyPadding); for heads that share
// nothing, as SD3's, it loads each tile synchronously and bound-checked,
// which kept SD3's attention at 57 TFLOP/s on an H100 (165 in groups). So
// token i·groups + r of head h becomes row i of query head r + groups·h,
// whose keys are head h's: the same scores, softmax and result. Taking
// every groups-th token, not runs of them, makes both layouts one
// exchange of two dimensions: [d, heads, groups, rows] to [d, groups,
// heads, rows] here, and back after the kernel (Attend), straight to the
// tokens in order.
func (q Tensor) Queries(bias Tensor, heads int) Queries {
	g, groups := q.g, max(q.g.be.groups, 1)
	size, tokens, n := q.Dim(0), q.Dim(1), q.Dim(2)
	d := size / heads
	out := Queries{raw: q, bias: bias, d: d, heads: heads, tokens: tokens, groups: groups}
	if pad := roundUp(tokens, groups) - tokens; pad > 0 {
		q = q.Concat(g.Zeros(size, pad, n), 1)
	}
	rows := q.Dim(1) / groups
	h := (*header)(q.t)
	es, token, batch := int(h.nb[0]), int(h.nb[1]), int(h.nb[2])
	if n > 1 && batch != q.Dim(1)*token { // the batch's items not one after the other: rows·n is no dimension
		q = q.Contiguous()
		h = (*header)(q.t)
		es, token, batch = int(h.nb[0]), int(h.nb[1]), int(h.nb[2])
	}
	if bias.t == nil && (groups == 1 || heads == 1) { // the layout is q's own: view it
		qh := d * es
		if heads == 1 {
			qh = token
		}
		out.op = q.view([4]int{d, rows, groups * heads, n}, [3]int{groups * token, qh, batch}, 0)
		return out
	}
	// [d, heads, groups, rows·n] to [d, groups, heads, rows·n], laid out.
	laid := q.view([4]int{d, heads, groups, rows * n}, [3]int{d * es, token, groups * token}, 0).Permute(0, 2, 1, 3)
	if bias.t != nil {
		laid = laid.Add(bias.Reshape(d, 1, heads, 1))
	} else {
		laid = laid.Contiguous()
	}
	out.op = laid.view([4]int{d, rows, groups * heads, n}, [3]int{groups * heads * d * es, d * es, rows * groups * heads * d * es}, 0)
	return out
}

// KeyPadding is how many rows of padding AttentionKeys wants after keys
// keys (0 where the device's attention takes them as they are): a caller
// that builds keys and values by concatenation pads there, sparing a copy
// of them.
func (be *Backend) KeyPadding(keys int) int {
	if be.groups <= 1 {
		return 0
	}
	return roundUp(keys, keyPadding) - keys
}

// Keys are an attention's keys and values laid out for the device's
// kernel (AttentionKeys), for Attend by any queries.
type Keys struct {
	k, v Tensor // [d, T, heads, n] views
	keys int
	// products are they laid out for the two products with the scores
	// between, where the BLAS backend computes those: once for every
	// Attend that reads them.
	products keysForProducts
}

// keysForProducts are keys [d, keys, heads, n] and values transposed,
// [keys, d, heads, n], each laid out in order, as matrix products read
// them (Queries.withScores).
type keysForProducts struct{ k, vt Tensor }

// forProducts is kv laid out for the two products: as AttentionKeys laid
// them out, or now.
func (kv Keys) forProducts() keysForProducts {
	if kv.products.k.t != nil {
		return kv.products
	}
	k, v := kv.k.Slice(1, 0, kv.keys), kv.v.Slice(1, 0, kv.keys)
	return keysForProducts{k: k.Contiguous(), vt: v.Permute(1, 0, 2, 3).Contiguous()}
}

// AttentionKeys lays keys k and values v [heads·d, T, n] out for
// attention: token by token as a projection makes them (contiguous),
// their first keys rows the keys and the rest padding (finite values;
// zeros serve), as KeyPadding asks for; where they fall short, they are
// padded here. They stay float32: ggml-cuda's kernel converts them to
// float16 at each call, in a vectorized pass that keeps their layout,
// which on an H100 cost less twice (the image's queries and the text's)
// than ggml's cast once, a value a thread (docs/benchmarks-gpu.md).
func AttentionKeys(k, v Tensor, keys, heads int) Keys {
	g := k.g
	size, n := k.Dim(0), k.Dim(2)
	switch want := keys + g.be.KeyPadding(keys); {
	case k.Dim(1) > want:
		k, v = k.Slice(1, 0, want), v.Slice(1, 0, want)
	case k.Dim(1) < want:
		k, v = k.Slice(1, 0, keys), v.Slice(1, 0, keys)
		k, v = k.Concat(g.Zeros(size, want-keys, n), 1), v.Concat(g.Zeros(size, want-keys, n), 1)
	}
	// The kernel reads them by their strides.
	kv := Keys{k: k.ByHead(heads), v: v.ByHead(heads), keys: keys}
	if g.AttendsByProducts(size/heads, keys) {
		kv.products = kv.forProducts()
	}
	return kv
}

// AttendsByProducts reports whether Attend computes attention over keys
// keys of heads d wide as two matrix products with the softmax of the
// scores between (a CPU with the BLAS backend): then the keys and values
// may come laid out for those products as their own products make them
// (ProductKeys), and need not be laid out for the flash kernel too.
func (g *Graph) AttendsByProducts(d, keys int) bool {
	return g.be.blas != nil && min(d, keys) >= blasMinSide
}

// ProductKeys are keys k [d, keys, heads, n] and values transposed vt
// [keys, d, heads, n], each in order or with its rows apart, for Attend
// as two products where AttendsByProducts holds (elsewhere too, at the
// products' speed).
func ProductKeys(k, vt Tensor) Keys {
	return Keys{keys: k.Dim(1), products: keysForProducts{k: k, vt: vt}}
}

// TokensAlongRows views y [tokens·n, heads·d], the product x.MulMat(w) of
// tokens x [in, tokens·n] and a matrix w [in, heads·d], which has each of
// its values' tokens along a row, as [tokens, d, heads, n]: values
// transposed, as ProductKeys takes them, without a transposition.
func (y Tensor) TokensAlongRows(tokens, heads, n int) Tensor {
	const f32 = 4
	d, row := y.Dim(1)/heads, int((*header)(y.t).nb[1]) // y's rows may be apart (MulMat)
	return y.view([4]int{tokens, d, heads, n}, [3]int{row, d * row, tokens * f32}, 0)
}

// ByHead views t [heads·d, tokens, n], token by token, as [d, tokens,
// heads, n], without copying.
func (t Tensor) ByHead(heads int) Tensor {
	h := (*header)(t.t)
	d := t.Dim(0) / heads
	return t.view([4]int{d, t.Dim(1), heads, t.Dim(2)}, [3]int{int(h.nb[1]), d * int(h.nb[0]), int(h.nb[2])}, 0)
}

// Attend is softmax(k·q·scale)·v per head over kv. The result is
// [heads·d, tokens, n], the tokens in order. It is ggml's flash attention,
// without the scores in memory, where the device runs it: in groups on
// CUDA (Tensor.Queries), with float32 keys and values on the CPU, else
// float16 ones. It is the two products with the scores between on a CPU
// with a BLAS backend, and for a head width the device's kernel lacks.
func (q Queries) Attend(kv Keys, scale float64) Tensor {
	if kv.products.k.t != nil && (kv.k.t == nil || q.groups == 1 && q.tokens >= blasMinSide) { // sgemm's products beat the CPU's flash kernel (blas.go)
		return q.withScores(kv.products, scale)
	}
	g, a := q.op.g, q.op.g.be.a
	d, heads, groups, n := q.d, q.heads, q.groups, q.op.Dim(3)
	size := d * heads
	var mask Tensor
	if groups > 1 {
		mask = g.keyMask(kv.keys, q.op.Dim(1))
	}
	flash := func(k, v Tensor) (Tensor, bool) {
		o := q.op.op(a.flashAttn(g.ctx, q.op.t, k.t, v.t, mask.t, float32(scale), 0, 0)) // [d, groups·heads, rows, n]
		return o, a.supportsOp(g.be.b, o.t)
	}
	o, ok := flash(kv.k, kv.v)
	if !ok && groups == 1 {
		o, ok = flash(kv.k.cast(typeF16), kv.v.cast(typeF16))
	}
	if !ok {
		return q.withScores(kv.forProducts(), scale)
	}
	rows := q.op.Dim(1)
	if groups > 1 && heads > 1 { // [d, groups, heads, rows·n] to [d, heads, groups, rows·n]
		o = o.Reshape(d, groups, heads, rows*n).Permute(0, 2, 1, 3).Contiguous()
	}
	o = o.Reshape(size, groups*rows, n)
	if groups*rows > q.tokens {
		o = o.Slice(1, 0, q.tokens)
	}
	return o
}

// withScores is Attend as two matrix products with the softmax of the
// scores between, from the queries as given: where the BLAS backend
// computes them, and for a device whose flash kernel lacks the head width.
func (q Queries) withScores(kv keysForProducts, scale float64) Tensor {
	laid := q.raw.ByHead(q.heads) // [d, tokens, heads, n], laid out in order by the bias's addition or a copy
	if q.bias.t != nil {
		laid = laid.Add(q.bias.Reshape(q.d, 1, q.heads, 1))
	} else {
		laid = laid.Contiguous()
	}
	return laid.attentionWithScores(kv, scale).Reshape(q.d*q.heads, q.tokens, q.raw.Dim(2))
}

// DefaultCUDAAttentionGroups is how many groups Queries splits each head's
// queries into on CUDA unless Options say otherwise.
const DefaultCUDAAttentionGroups = 8

// keyPadding is the multiple grouped attention pads its keys to: CUDA's
// flash attention takes its grouped path only for keys padded to its
// stride (FATTN_KQ_STRIDE).
const keyPadding = 256

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// attentionWithScores is attention over q [d, queries, heads, n], laid
// out in order, and kv as two matrix products with the softmax of the
// scores, [keys, queries, heads, n], between them; the result is [d,
// heads, queries, n].
func (q Tensor) attentionWithScores(kv keysForProducts, scale float64) Tensor {
	scores := kv.k.MulMat(q).SoftMaxScaled(scale) // [keys, queries, heads, n]
	o := kv.vt.MulMat(scores)                     // [d, queries, heads, n]
	return o.Permute(0, 2, 1, 3).Contiguous()
}

// cast is t converted to the element type typ.
func (t Tensor) cast(typ int32) Tensor { return t.op(t.g.be.a.cast(t.g.ctx, t.t, typ)) }

// SoftMaxScaled is the softmax of each row of t·scale.
func (t Tensor) SoftMaxScaled(scale float64) Tensor {
	return t.op(t.g.be.a.softMaxEx(t.g.ctx, t.t, nil, float32(scale), 0))
}
