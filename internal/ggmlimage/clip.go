package ggmlimage

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/ollama/ollama/ml"

	"github.com/genq/genq/internal/sd3"
)

// CLIP is one of SD3's CLIP text encoders (transformers'
// CLIPTextModelWithProjection).
type CLIP struct {
	part *part
	cfg  sd3.CLIPConfig
}

// OpenCLIP loads a CLIP encoder GGUF written by internal/sd3.
func OpenCLIP(ctx context.Context, path string, threads int) (*CLIP, error) {
	return openCLIP(ctx, path, loadOptions{threads: threads})
}

func openCLIP(ctx context.Context, path string, opts loadOptions) (*CLIP, error) {
	p, cfg, err := openPart(ctx, path, opts, sd3.CLIPConfigOf, sd3.CLIPConfig.CLIPTensors)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return &CLIP{part: p, cfg: cfg}, nil
}

// Config is the encoder's configuration, read from its file.
func (e *CLIP) Config() sd3.CLIPConfig { return e.cfg }

// Close frees the weights; a nil CLIP is a no-op.
func (e *CLIP) Close() {
	if e != nil {
		e.part.close()
	}
}

// Encode runs n token sequences of seq ids each and returns what SD3 takes
// from them: the penultimate layer's hidden states [n, seq, width] (the
// input of the last layer, not normed) and the text embeddings [n,
// projection] (the final state of the end token, the first largest id as
// transformers finds it, projected).
func (e *CLIP) Encode(ids []int32, n, seq int) (hidden, pooled []float32, err error) {
	c := e.cfg
	if len(ids) != n*seq || seq > c.Positions {
		return nil, nil, fmt.Errorf("clip: %d ids for %d sequences of %d (at most %d)", len(ids), n, seq, c.Positions)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= c.Vocab {
			return nil, nil, fmt.Errorf("clip: token id %d outside the vocabulary of %d", id, c.Vocab)
		}
	}
	ends := make([]int32, n)
	for i := range ends {
		row := ids[i*seq : (i+1)*seq]
		ends[i] = int32(i*seq + slices.Index(row, slices.Max(row)))
	}
	e.part.mu.Lock()
	defer e.part.mu.Unlock()
	defer recoverError(&err)
	ctx := e.part.backend.NewContext()
	defer ctx.Close()
	in := ctx.Input()
	mask := make([]float32, seq*seq)
	for q := range seq {
		for k := q + 1; k < seq; k++ {
			mask[q*seq+k] = float32(math.Inf(-1))
		}
	}
	positions := make([]int32, seq)
	for i := range positions {
		positions[i] = int32(i)
	}
	pen, final := e.forward(ctx, in.FromInts(ids, seq*n), in.FromInts(positions, seq), n, in.FromFloats(mask, seq, seq))
	// The penultimate state feeds the last layer, so the graph's allocator
	// would reuse its memory: copy it out to a buffer of its own.
	penOut := pen.Copy(ctx, in.Empty(ml.DTypeF32, c.Width, seq, n))
	rows := final.Reshape(ctx, c.Width, seq*n).Rows(ctx, in.FromInts(ends, n))
	proj := e.part.weight("text_projection.weight").Mulmat(ctx, rows) // [projection, n]
	ctx.Forward(penOut, proj).Compute(penOut, proj)
	return penOut.Floats(), proj.Floats(), nil
}

// forward returns the penultimate hidden states and the final normed
// states, [width, seq, n] each.
func (e *CLIP) forward(ctx ml.Context, ids, positions ml.Tensor, n int, mask ml.Tensor) (pen, final ml.Tensor) {
	p, c := e.part, e.cfg
	seq := positions.Dim(0)
	// Rows reads float16 tables into float32, which additions need.
	x := p.weight("text_model.embeddings.token_embedding.weight").Rows(ctx, ids).Reshape(ctx, c.Width, seq, n)
	x = x.Add(ctx, p.weight("text_model.embeddings.position_embedding.weight").Rows(ctx, positions))
	for i := range c.Layers {
		if i == c.Layers-1 {
			pen = x
		}
		x = e.layer(ctx, sd3.CLIPLayer(i), x, mask)
	}
	if c.Layers == 1 {
		pen = x
	}
	return pen, e.norm(ctx, "text_model.final_layer_norm.", x)
}

func (e *CLIP) norm(ctx ml.Context, prefix string, x ml.Tensor) ml.Tensor {
	return x.LayerNorm(ctx, e.part.weight(prefix+"weight"), e.part.weight(prefix+"bias"), sd3.CLIPNormEps)
}

func (e *CLIP) layer(ctx ml.Context, pre string, x, mask ml.Tensor) ml.Tensor {
	p, heads := e.part, e.cfg.Heads
	hd := e.cfg.Width / heads
	seq, n := x.Dim(1), x.Dim(2)
	h := e.norm(ctx, pre+"layer_norm1.", x)
	q := p.linear(ctx, pre+"self_attn.q_proj.", h).Reshape(ctx, hd, heads, seq, n).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx) // [hd, seq, heads, n]; contiguous for the fast matrix kernel
	k := p.linear(ctx, pre+"self_attn.k_proj.", h).Reshape(ctx, hd, heads, seq, n).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)
	v := p.linear(ctx, pre+"self_attn.v_proj.", h).Reshape(ctx, hd, heads, seq, n).Permute(ctx, 1, 2, 0, 3).Contiguous(ctx) // [seq, hd, heads, n]
	scores := k.Mulmat(ctx, q).Scale(ctx, 1/math.Sqrt(float64(hd))).Add(ctx, mask).Softmax(ctx)                             // [keys, queries, heads, n]
	o := v.Mulmat(ctx, scores).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx).Reshape(ctx, hd*heads, seq, n)
	x = x.Add(ctx, p.linear(ctx, pre+"self_attn.out_proj.", o))

	h = p.linear(ctx, pre+"mlp.fc1.", e.norm(ctx, pre+"layer_norm2.", x))
	if e.cfg.QuickGELU {
		// x·sigmoid(1.702x), written out: ggml's fused quick GELU reads a
		// float16 table on the CPU.
		h = h.Mul(ctx, h.Scale(ctx, 1.702).Sigmoid(ctx))
	} else {
		h = h.GELU_ERF(ctx)
	}
	return x.Add(ctx, p.linear(ctx, pre+"mlp.fc2.", h))
}
