package tinyexport

import (
	"fmt"
	"math"

	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/sd3"
)

// sd3CLIPModel is a CLIPTextModelWithProjection in its real architecture
// (token and position embeddings, pre-norm causal self-attention layers,
// the final layer norm, the projection of the end token's state), with the
// outputs optimum's export has: text_embeds, last_hidden_state and
// hidden_states.0 … hidden_states.N.
func sd3CLIPModel(b *graph, cfg sd3.CLIPConfig, w sd3.Weights) []byte {
	b.input("input_ids", b.io.ids, param("batch_size"), param("sequence_length"))
	m := clipGraph{weighted{b, w}, cfg}
	d := int64(cfg.Width)
	ids := b.op("Cast", []string{"input_ids"}, onnxproto.IntAttr("to", int64(onnxproto.Int64)))
	seq := b.op("Gather", []string{b.op("Shape", []string{ids}), b.ints(1)})
	pos := b.op("Slice", []string{m.tensor("text_model.embeddings.position_embedding.weight"), b.ints(0), seq, b.ints(0)})
	x := b.op("Add", []string{b.op("Gather", []string{m.tensor("text_model.embeddings.token_embedding.weight"), ids}), pos})

	// The causal mask, cut to the sequence.
	n := int64(cfg.Positions)
	mask := make([]float32, n*n)
	for q := range n {
		for k := q + 1; k < n; k++ {
			mask[q*n+k] = float32(math.Inf(-1))
		}
	}
	causal := b.op("Slice", []string{b.floatData([]int64{n, n}, mask), b.ints(0, 0), b.op("Concat", []string{seq, seq}, onnxproto.IntAttr("axis", 0)), b.ints(0, 1)})

	hidden := []string{x}
	for i := range cfg.Layers {
		x = m.layer(sd3.CLIPLayer(i), x, causal)
		hidden = append(hidden, x)
	}
	final := m.norm("text_model.final_layer_norm.", x)

	// The end token's state: the first position of the largest id, as
	// transformers finds <|endoftext|>.
	eos := b.op("ArgMax", []string{b.op("Cast", []string{ids}, onnxproto.IntAttr("to", int64(onnxproto.Float)))}, onnxproto.IntAttr("axis", 1), onnxproto.IntAttr("keepdims", 0))
	idx := b.op("Unsqueeze", []string{eos, b.ints(1, 2)}) // [B, 1, 1]
	batch := b.op("Gather", []string{b.op("Shape", []string{ids}), b.ints(0)})
	idx = b.op("Expand", []string{idx, b.op("Concat", []string{batch, b.ints(1, d)}, onnxproto.IntAttr("axis", 0))})
	pooled := b.op("Squeeze", []string{b.op("GatherElements", []string{final, idx}, onnxproto.IntAttr("axis", 1)), b.ints(1)})
	proj := b.op("Transpose", []string{m.tensor("text_projection.weight")}, onnxproto.IntsAttr("perm", 1, 0))
	b.output("text_embeds", b.op("MatMul", []string{pooled, proj}), param("batch_size"), fixed(int64(cfg.Projection)))
	b.output("last_hidden_state", final, param("batch_size"), param("sequence_length"), fixed(d))
	for i, hs := range hidden {
		b.output(fmt.Sprintf("hidden_states.%d", i), hs, param("batch_size"), param("sequence_length"), fixed(d))
	}
	return b.model()
}

type clipGraph struct {
	weighted
	cfg sd3.CLIPConfig
}

func (m clipGraph) norm(prefix, x string) string {
	return m.op("LayerNormalization", []string{x, m.tensor(prefix + "weight"), m.tensor(prefix + "bias")},
		onnxproto.IntAttr("axis", -1), onnxproto.FloatAttr("epsilon", sd3.CLIPNormEps))
}

func (m clipGraph) layer(p, x, causal string) string {
	heads, hd := int64(m.cfg.Heads), int64(m.cfg.Width/m.cfg.Heads)
	h := m.norm(p+"layer_norm1.", x)
	split := func(name string) string { // [B, heads, S, hd]
		return m.op("Transpose", []string{m.op("Reshape", []string{m.linear(p+"self_attn."+name, h), m.ints(0, 0, heads, hd)})}, onnxproto.IntsAttr("perm", 0, 2, 1, 3))
	}
	q, k, v := split("q_proj."), split("k_proj."), split("v_proj.")
	scores := m.op("MatMul", []string{q, m.op("Transpose", []string{k}, onnxproto.IntsAttr("perm", 0, 1, 3, 2))})
	scores = m.op("Add", []string{m.op("Mul", []string{scores, m.floats(nil, float32(1/math.Sqrt(float64(hd))))}), causal})
	o := m.op("MatMul", []string{m.op("Softmax", []string{scores}, onnxproto.IntAttr("axis", -1)), v})
	o = m.op("Reshape", []string{m.op("Transpose", []string{o}, onnxproto.IntsAttr("perm", 0, 2, 1, 3)), m.ints(0, 0, heads*hd)})
	x = m.op("Add", []string{x, m.linear(p+"self_attn.out_proj.", o)})

	h = m.linear(p+"mlp.fc1.", m.norm(p+"layer_norm2.", x))
	if m.cfg.QuickGELU {
		h = m.op("Mul", []string{h, m.op("Sigmoid", []string{m.op("Mul", []string{h, m.floats(nil, 1.702)})})})
	} else { // exact GELU
		e := m.op("Erf", []string{m.op("Mul", []string{h, m.floats(nil, float32(1/math.Sqrt2))})})
		h = m.op("Mul", []string{m.op("Mul", []string{h, m.floats(nil, 0.5)}), m.op("Add", []string{e, m.floats(nil, 1)})})
	}
	return m.op("Add", []string{x, m.linear(p+"mlp.fc2.", h)})
}
