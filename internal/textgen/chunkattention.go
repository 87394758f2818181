package textgen

import "github.com/ollama/ollama/ml"

// matmulChunk reports whether grp, a prompt chunk, attends with matrix
// products rather than the flash kernel.
func (g *streamGraph) matmulChunk(grp attentionGroup) bool {
	return g.matmulChunks && !grp.single
}

// matmulChunkAttention is a prompt chunk's attention as two matrix
// products over its stream, where the flash kernel serves decoding: query
// [headDim, heads, tokens] in, [headDim·heads, tokens] out. ggml's CPU
// flash kernel walks the cells once per query row; a chunk of hundreds of
// rows is a matrix product, which the CPU's GEMM does faster
// (docs/text.md, "The forward graph"). The values, stored head-major for the
// flash kernel, are transposed for the product: a copy of the chunk's
// attended cells, small beside the chunk's own weights.
func (g *streamGraph) matmulChunkAttention(ctx ml.Context, query, keys, values, mask ml.Tensor, grp attentionGroup, scale float64) ml.Tensor {
	s := g.shape
	key, value := g.streamViews(ctx, keys, values, grp)                                    // [headDim, kvHeads, cells]
	kq := key.Permute(ctx, 0, 2, 1, 3).MulmatFullPrec(ctx, query.Permute(ctx, 0, 2, 1, 3)) // [cells, tokens, heads]
	kq = kq.Scale(ctx, scale).Add(ctx, mask).Softmax(ctx)
	v := value.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx) // [cells, headDim, kvHeads]
	kqv := v.Mulmat(ctx, kq)                            // [headDim, tokens, heads]
	return kqv.Permute(ctx, 0, 2, 1, 3).Contiguous(ctx).Reshape(ctx, s.headDim*s.heads, grp.tokens)
}
