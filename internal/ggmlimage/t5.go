package ggmlimage

import (
	"context"
	"fmt"

	"github.com/ollama/ollama/ml"

	"github.com/genq/genq/internal/sd3"
)

// T5 is SD3's T5 text encoder (transformers' T5EncoderModel).
type T5 struct {
	part *part
	cfg  sd3.T5Config
}

// OpenT5 loads a T5 encoder GGUF written by internal/sd3.
func OpenT5(ctx context.Context, path string, threads int) (*T5, error) {
	return openT5(ctx, path, loadOptions{threads: threads})
}

func openT5(ctx context.Context, path string, opts loadOptions) (*T5, error) {
	p, cfg, err := openPart(ctx, path, opts, sd3.T5ConfigOf, sd3.T5Config.T5Tensors)
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
func (e *T5) Encode(ids []int32, n, seq int) (hidden []float32, err error) {
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
	defer recoverError(&err)
	ctx := e.part.backend.NewContext()
	defer ctx.Close()
	in := ctx.Input()
	p := e.part
	x := p.weight("shared.weight").Rows(ctx, in.FromInts(ids, seq*n)).Reshape(ctx, c.Width, seq, n)
	// The position bias [keys, queries, heads], the same in every layer.
	bias := p.weight(sd3.T5RelativeBias).Rows(ctx, in.FromInts(c.T5Buckets(seq), seq*seq)) // [heads, key + query·seq]
	bias = bias.Reshape(ctx, c.Heads, seq, seq).Permute(ctx, 2, 0, 1, 3).Contiguous(ctx)
	for i := range c.Layers {
		x = e.block(ctx, sd3.T5Block(i), x, bias)
	}
	x = x.RMSNorm(ctx, p.weight("final_layer_norm.weight"), sd3.T5NormEps)
	ctx.Forward(x).Compute(x)
	return x.Floats(), nil
}

func (e *T5) block(ctx ml.Context, pre string, x, bias ml.Tensor) ml.Tensor {
	p, heads, hd := e.part, e.cfg.Heads, e.cfg.HeadDim
	seq, n := x.Dim(1), x.Dim(2)
	h := x.RMSNorm(ctx, p.weight(pre+"layer.0.layer_norm.weight"), sd3.T5NormEps)
	proj := func(name string) ml.Tensor {
		return p.weight(pre+"layer.0.SelfAttention."+name).Mulmat(ctx, h).Reshape(ctx, hd, heads, seq, n)
	}
	q := proj("q.weight").Permute(ctx, 0, 2, 1, 3).Contiguous(ctx) // [hd, seq, heads, n]; contiguous for the fast matrix kernel
	k := proj("k.weight").Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)
	v := proj("v.weight").Permute(ctx, 1, 2, 0, 3).Contiguous(ctx) // [seq, hd, heads, n]
	scores := k.Mulmat(ctx, q).Add(ctx, bias).Softmax(ctx)         // T5 does not scale its scores
	o := v.Mulmat(ctx, scores).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx).Reshape(ctx, hd*heads, seq, n)
	x = x.Add(ctx, p.weight(pre+"layer.0.SelfAttention.o.weight").Mulmat(ctx, o))

	h = x.RMSNorm(ctx, p.weight(pre+"layer.1.layer_norm.weight"), sd3.T5NormEps)
	gate := p.weight(pre+"layer.1.DenseReluDense.wi_0.weight").Mulmat(ctx, h)
	up := p.weight(pre+"layer.1.DenseReluDense.wi_1.weight").Mulmat(ctx, h)
	return x.Add(ctx, p.weight(pre+"layer.1.DenseReluDense.wo.weight").Mulmat(ctx, geluTanh(ctx, gate).Mul(ctx, up)))
}
