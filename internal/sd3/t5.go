package sd3

import (
	"fmt"
	"math"
)

// T5Config is the part of transformers' T5Config that SD3's T5 encoder
// (T5EncoderModel, gated GELU) needs.
type T5Config struct {
	Vocab, Width, Layers, Heads, HeadDim, FFN int
	Buckets, MaxDistance                      int // relative position buckets
}

// T5NormEps is the epsilon of T5's RMS norms.
const T5NormEps = 1e-6

// T5XXL is SD3's T5 encoder.
func T5XXL() T5Config {
	return T5Config{Vocab: 32128, Width: 4096, Layers: 24, Heads: 64, HeadDim: 64, FFN: 10240, Buckets: 32, MaxDistance: 128}
}

// TinyT5 is a T5 encoder of width w over a vocabulary of vocab pieces.
func TinyT5(vocab, width int) T5Config {
	return T5Config{Vocab: vocab, Width: width, Layers: 2, Heads: 2, HeadDim: 8, FFN: 32, Buckets: 32, MaxDistance: 128}
}

// Check reports a configuration the encoder cannot be built from.
func (c T5Config) Check() error {
	for _, v := range []int{c.Vocab, c.Width, c.Layers, c.Heads, c.HeadDim, c.FFN, c.Buckets, c.MaxDistance} {
		if v <= 0 {
			return fmt.Errorf("t5 config %+v: every size must be positive", c)
		}
	}
	return nil
}

// T5Block is the prefix of block i's tensors. GGUF files drop
// transformers' "encoder." prefix: ggml's names hold 63 bytes, and the
// relative attention bias's full name is longer.
func T5Block(i int) string { return fmt.Sprintf("block.%d.", i) }

// T5RelativeBias is the one relative position table, block 0's, which
// every layer uses.
const T5RelativeBias = "block.0.layer.0.SelfAttention.relative_attention_bias.weight"

// T5Tensors lists every tensor of the encoder, in transformers' names less
// the "encoder." prefix.
func (c T5Config) T5Tensors() []Spec {
	d, inner := c.Width, c.Heads*c.HeadDim
	specs := []Spec{{"shared.weight", []int{c.Vocab, d}}, {T5RelativeBias, []int{c.Buckets, c.Heads}}}
	for i := range c.Layers {
		p := T5Block(i)
		specs = append(specs,
			Spec{p + "layer.0.layer_norm.weight", []int{d}},
			Spec{p + "layer.0.SelfAttention.q.weight", []int{inner, d}},
			Spec{p + "layer.0.SelfAttention.k.weight", []int{inner, d}},
			Spec{p + "layer.0.SelfAttention.v.weight", []int{inner, d}},
			Spec{p + "layer.0.SelfAttention.o.weight", []int{d, inner}},
			Spec{p + "layer.1.layer_norm.weight", []int{d}},
			Spec{p + "layer.1.DenseReluDense.wi_0.weight", []int{c.FFN, d}},
			Spec{p + "layer.1.DenseReluDense.wi_1.weight", []int{c.FFN, d}},
			Spec{p + "layer.1.DenseReluDense.wo.weight", []int{d, c.FFN}},
		)
	}
	return append(specs, Spec{"final_layer_norm.weight", []int{d}})
}

// T5Buckets is the relative position bucket of every (query, key) pair of
// a sequence, [query][key] row-major, as transformers'
// _relative_position_bucket computes it for an encoder (bidirectional),
// in float32 where it does.
func (c T5Config) T5Buckets(seq int) []int32 {
	half := c.Buckets / 2
	exact := half / 2
	out := make([]int32, seq*seq)
	for q := range seq {
		for k := range seq {
			rel := k - q
			bucket := 0
			if rel > 0 {
				bucket = half
			}
			rel = max(rel, -rel)
			if rel < exact {
				bucket += rel
			} else {
				ratio := float32(math.Log(float64(float32(rel)/float32(exact)))) / float32(math.Log(float64(c.MaxDistance)/float64(exact)))
				bucket += min(exact+int(ratio*float32(half-exact)), half-1)
			}
			out[q*seq+k] = int32(bucket)
		}
	}
	return out
}
