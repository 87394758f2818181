package tinyexport

import (
	"math"

	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/sd3"
)

// t5MaxLen is the longest sequence the tiny T5's bucket table covers:
// SD3's 256 tokens.
const t5MaxLen = 256

// sd3T5Model is a T5EncoderModel in its real architecture (RMS norms,
// self-attention with relative position buckets and no scaling, gated GELU
// feed-forward), input_ids → last_hidden_state.
func sd3T5Model(b *graph, cfg sd3.T5Config, w sd3.Weights) []byte {
	b.input("input_ids", b.io.ids, param("batch_size"), param("sequence_length"))
	m := t5Graph{weighted{b, w}, cfg}
	ids := b.op("Cast", []string{"input_ids"}, onnxproto.IntAttr("to", int64(onnxproto.Int64)))
	seq := b.op("Gather", []string{b.op("Shape", []string{ids}), b.ints(1)})
	x := b.op("Gather", []string{m.tensor("shared.weight"), ids})

	// The position bias [1, heads, query, key], the same in every layer.
	buckets := cfg.T5Buckets(t5MaxLen)
	table := make([]int64, len(buckets))
	for i, v := range buckets {
		table[i] = int64(v)
	}
	bt := b.int64Data([]int64{t5MaxLen, t5MaxLen}, table)
	bt = b.op("Slice", []string{bt, b.ints(0, 0), b.op("Concat", []string{seq, seq}, onnxproto.IntAttr("axis", 0)), b.ints(0, 1)})
	bias := b.op("Gather", []string{m.tensor(sd3.T5RelativeBias), bt}) // [q, k, heads]
	bias = b.op("Unsqueeze", []string{b.op("Transpose", []string{bias}, onnxproto.IntsAttr("perm", 2, 0, 1)), b.ints(0)})

	for i := range cfg.Layers {
		x = m.block(sd3.T5Block(i), x, bias)
	}
	b.output("last_hidden_state", m.rmsNorm("final_layer_norm.weight", x), param("batch_size"), param("sequence_length"), fixed(int64(cfg.Width)))
	return b.model()
}

type t5Graph struct {
	weighted
	cfg sd3.T5Config
}

// linear is x·Wᵀ, T5's layers have no biases.
func (m t5Graph) linear(name, x string) string {
	return m.op("MatMul", []string{x, m.op("Transpose", []string{m.tensor(name)}, onnxproto.IntsAttr("perm", 1, 0))})
}

// rmsNorm is T5LayerNorm: x / √(mean(x²) + ε) · weight.
func (m t5Graph) rmsNorm(name, x string) string {
	ms := m.op("ReduceMean", []string{m.op("Mul", []string{x, x})}, onnxproto.IntsAttr("axes", -1), onnxproto.IntAttr("keepdims", 1))
	r := m.op("Sqrt", []string{m.op("Add", []string{ms, m.floats(nil, sd3.T5NormEps)})})
	return m.op("Mul", []string{m.op("Div", []string{x, r}), m.tensor(name)})
}

func (m t5Graph) block(p, x, bias string) string {
	heads, hd := int64(m.cfg.Heads), int64(m.cfg.HeadDim)
	h := m.rmsNorm(p+"layer.0.layer_norm.weight", x)
	split := func(name string) string {
		return m.op("Transpose", []string{m.op("Reshape", []string{m.linear(p+"layer.0.SelfAttention."+name, h), m.ints(0, 0, heads, hd)})}, onnxproto.IntsAttr("perm", 0, 2, 1, 3))
	}
	q, k, v := split("q.weight"), split("k.weight"), split("v.weight")
	scores := m.op("Add", []string{m.op("MatMul", []string{q, m.op("Transpose", []string{k}, onnxproto.IntsAttr("perm", 0, 1, 3, 2))}), bias})
	o := m.op("MatMul", []string{m.op("Softmax", []string{scores}, onnxproto.IntAttr("axis", -1)), v})
	o = m.op("Reshape", []string{m.op("Transpose", []string{o}, onnxproto.IntsAttr("perm", 0, 2, 1, 3)), m.ints(0, 0, heads*hd)})
	x = m.op("Add", []string{x, m.linear(p+"layer.0.SelfAttention.o.weight", o)})

	h = m.rmsNorm(p+"layer.1.layer_norm.weight", x)
	g := m.linear(p+"layer.1.DenseReluDense.wi_0.weight", h)
	cube := m.op("Mul", []string{m.op("Mul", []string{g, g}), g})
	t := m.op("Tanh", []string{m.op("Mul", []string{m.op("Add", []string{g, m.op("Mul", []string{cube, m.floats(nil, 0.044715)})}), m.floats(nil, float32(math.Sqrt(2/math.Pi)))})})
	g = m.op("Mul", []string{m.op("Mul", []string{g, m.floats(nil, 0.5)}), m.op("Add", []string{t, m.floats(nil, 1)})}) // gelu_new
	h = m.op("Mul", []string{g, m.linear(p+"layer.1.DenseReluDense.wi_1.weight", h)})
	return m.op("Add", []string{x, m.linear(p+"layer.1.DenseReluDense.wo.weight", h)})
}

func (b *graph) int64Data(dims []int64, vals []int64) string {
	name := b.ints(vals...)
	b.g.Initializers[len(b.g.Initializers)-1].Dims = dims
	return name
}
