package ggmlimage

import (
	"fmt"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// T5 is SD3's T5 text encoder (transformers' T5EncoderModel).
type T5 struct {
	part *part
	cfg  sd3.T5Config
}

// OpenT5 loads a T5 encoder GGUF written by internal/sd3 onto a CPU
// backend of its own.
func OpenT5(path string, threads int) (*T5, error) {
	return openT5(path, placement{threads: threads})
}

func openT5(path string, on placement) (*T5, error) {
	p, cfg, err := openPart(path, on, sd3.T5ConfigOf, sd3.T5Config.T5Tensors, nil)
	if err != nil {
		return nil, fmt.Errorf("t5: %w", err)
	}
	return &T5{part: p, cfg: cfg}, nil
}

// Config is the encoder's configuration, read from its file.
func (e *T5) Config() sd3.T5Config { return e.cfg }

// Close frees the weights; a nil T5 is a no-op.
func (e *T5) Close() {
	if e != nil {
		e.part.close()
	}
}

// Encode runs n sequences of seq ids and returns the last hidden states
// [n, seq, width].
func (e *T5) Encode(ids []int32, n, seq int) ([]float32, error) {
	c := e.cfg
	if len(ids) != n*seq {
		return nil, fmt.Errorf("t5: %d ids for %d sequences of %d", len(ids), n, seq)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= c.Vocab {
			return nil, fmt.Errorf("t5: token id %d outside the vocabulary of %d", id, c.Vocab)
		}
	}
	e.part.mu.Lock()
	defer e.part.mu.Unlock()
	g := e.part.graph()
	defer g.Close()
	p := e.part
	x := p.weight(g, "shared.weight").GetRows(g.InputInts(ids, seq*n)).Reshape(c.Width, seq, n)
	// The position bias [keys, queries, heads], the same in every layer.
	bias := p.weight(g, sd3.T5RelativeBias).GetRows(g.InputInts(c.T5Buckets(seq), seq*seq)) // [heads, key + query·seq]
	bias = bias.Reshape(c.Heads, seq, seq).Permute(2, 0, 1, 3).Contiguous()
	for i := range c.Layers {
		x = e.block(g, sd3.T5Block(i), x, bias)
	}
	x = x.RMSNorm(sd3.T5NormEps).Mul(p.weight(g, "final_layer_norm.weight"))
	out, err := g.Compute(x)
	if err != nil {
		return nil, fmt.Errorf("t5: %w", err)
	}
	return out, nil
}

func (e *T5) block(g *tensor.Graph, pre string, x, bias tensor.Tensor) tensor.Tensor {
	p, heads, hd := e.part, e.cfg.Heads, e.cfg.HeadDim
	seq, n := x.Dim(1), x.Dim(2)
	h := x.RMSNorm(sd3.T5NormEps).Mul(p.weight(g, pre+"layer.0.layer_norm.weight"))
	proj := func(name string) tensor.Tensor {
		return p.weight(g, pre+"layer.0.SelfAttention."+name).MulMat(h).Reshape(hd, heads, seq, n)
	}
	q := proj("q.weight").Permute(0, 2, 1, 3).Contiguous() // [hd, seq, heads, n]; contiguous for the fast matrix kernel
	k := proj("k.weight").Permute(0, 2, 1, 3).Contiguous()
	v := proj("v.weight").Permute(1, 2, 0, 3).Contiguous() // [seq, hd, heads, n]
	scores := k.MulMat(q).Add(bias).SoftMax()              // T5 does not scale its scores
	o := v.MulMat(scores).Permute(0, 2, 1, 3).Contiguous().Reshape(hd*heads, seq, n)
	x = x.Add(p.weight(g, pre+"layer.0.SelfAttention.o.weight").MulMat(o))

	h = x.RMSNorm(sd3.T5NormEps).Mul(p.weight(g, pre+"layer.1.layer_norm.weight"))
	gate := p.weight(g, pre+"layer.1.DenseReluDense.wi_0.weight").MulMat(h)
	up := p.weight(g, pre+"layer.1.DenseReluDense.wi_1.weight").MulMat(h)
	return x.Add(p.weight(g, pre+"layer.1.DenseReluDense.wo.weight").MulMat(geluTanh(gate).Mul(up)))
}
