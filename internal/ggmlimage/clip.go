package ggmlimage

import (
	"fmt"
	"math"
	"slices"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// CLIP is one of SD3's CLIP text encoders (transformers'
// CLIPTextModelWithProjection).
type CLIP struct {
	part *part
	cfg  sd3.CLIPConfig
}

// OpenCLIP loads a CLIP encoder GGUF written by internal/sd3 onto a CPU
// backend of its own.
func OpenCLIP(path string, threads int) (*CLIP, error) {
	return openCLIP(path, placement{threads: threads})
}

func openCLIP(path string, on placement) (*CLIP, error) {
	p, cfg, err := openPart(path, on, sd3.CLIPConfigOf, sd3.CLIPConfig.CLIPTensors, nil)
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
	e.part.mu.Lock()
	defer e.part.mu.Unlock()
	g := e.part.graph()
	defer g.Close()
	pen, final := e.forward(g, g.InputInts(ids, seq*n), g.InputInts(positions, seq), n, g.Input(mask, seq, seq))
	rows := final.Reshape(c.Width, seq*n).GetRows(g.InputInts(ends, n))
	proj := e.part.weight(g, "text_projection.weight").MulMat(rows) // [projection, n]
	// The penultimate state feeds the last layer: as an output it keeps
	// its memory.
	out, err := g.ComputeAll(pen, proj)
	if err != nil {
		return nil, nil, fmt.Errorf("clip: %w", err)
	}
	return out[0], out[1], nil
}

// forward returns the penultimate hidden states and the final normed
// states, [width, seq, n] each.
func (e *CLIP) forward(g *tensor.Graph, ids, positions tensor.Tensor, n int, mask tensor.Tensor) (pen, final tensor.Tensor) {
	p, c := e.part, e.cfg
	seq := positions.Dim(0)
	// GetRows reads float16 tables into float32, which additions need.
	x := p.weight(g, "text_model.embeddings.token_embedding.weight").GetRows(ids).Reshape(c.Width, seq, n)
	x = x.Add(p.weight(g, "text_model.embeddings.position_embedding.weight").GetRows(positions))
	for i := range c.Layers {
		if i == c.Layers-1 {
			pen = x
		}
		x = e.layer(g, sd3.CLIPLayer(i), x, mask)
	}
	if c.Layers == 1 {
		pen = x
	}
	return pen, p.layerNorm(g, "text_model.final_layer_norm.", x, sd3.CLIPNormEps)
}

func (e *CLIP) layer(g *tensor.Graph, pre string, x, mask tensor.Tensor) tensor.Tensor {
	p, heads := e.part, e.cfg.Heads
	hd := e.cfg.Width / heads
	seq, n := x.Dim(1), x.Dim(2)
	h := p.layerNorm(g, pre+"layer_norm1.", x, sd3.CLIPNormEps)
	q := p.linear(g, pre+"self_attn.q_proj.", h).Reshape(hd, heads, seq, n).Permute(0, 2, 1, 3).Contiguous() // [hd, seq, heads, n]; contiguous for the fast matrix kernel
	k := p.linear(g, pre+"self_attn.k_proj.", h).Reshape(hd, heads, seq, n).Permute(0, 2, 1, 3).Contiguous()
	v := p.linear(g, pre+"self_attn.v_proj.", h).Reshape(hd, heads, seq, n).Permute(1, 2, 0, 3).Contiguous() // [seq, hd, heads, n]
	scores := k.MulMat(q).SoftMaxMasked(mask, 1/math.Sqrt(float64(hd)))                                      // [keys, queries, heads, n]
	o := v.MulMat(scores).Permute(0, 2, 1, 3).Contiguous().Reshape(hd*heads, seq, n)
	x = x.Add(p.linear(g, pre+"self_attn.out_proj.", o))

	h = p.linear(g, pre+"mlp.fc1.", p.layerNorm(g, pre+"layer_norm2.", x, sd3.CLIPNormEps))
	if e.cfg.QuickGELU {
		// x·sigmoid(1.702x), written out: ggml's fused quick GELU reads a
		// float16 table on the CPU.
		h = h.Mul(h.Scale(1.702).Sigmoid())
	} else {
		h = h.GELUErf()
	}
	return x.Add(p.linear(g, pre+"mlp.fc2.", h))
}
