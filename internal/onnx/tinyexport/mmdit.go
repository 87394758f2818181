package tinyexport

import (
	"math"

	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/sd3"
)

// sd3TransformerModel is SD3's SD3Transformer2DModel in its real
// architecture (patch embedding, the cropped 2-D position table, timestep
// and pooled-text embedders, joint attention blocks with adaLN modulation,
// the final layer), its weights from w under diffusers' names, with the
// inputs and output optimum's export has.
func sd3TransformerModel(b *graph, cfg sd3.MMDiTConfig, w sd3.Weights) []byte {
	b.input("hidden_states", b.io.float, param("batch_size"), fixed(int64(cfg.InChannels)), param("height"), param("width"))
	b.input("encoder_hidden_states", b.io.float, param("batch_size"), param("sequence_length"), fixed(int64(cfg.JointDim)))
	b.input("pooled_projections", b.io.float, param("batch_size"), fixed(int64(cfg.PooledDim)))
	b.input("timestep", b.io.float, param("step"))
	m := mmditGraph{weighted{b, w}, cfg}
	latent := b.toFloat("hidden_states")
	d, p := int64(cfg.Width()), int64(cfg.PatchSize)

	x := b.op("Conv", []string{latent, m.tensor("pos_embed.proj.weight"), m.tensor("pos_embed.proj.bias")},
		onnxproto.IntsAttr("kernel_shape", p, p), onnxproto.IntsAttr("strides", p, p))
	x = b.op("Transpose", []string{b.op("Reshape", []string{x, b.ints(0, d, -1)})}, onnxproto.IntsAttr("perm", 0, 2, 1)) // [B, patches, D]
	x = b.op("Add", []string{x, m.croppedPositions(latent)})

	t := b.op("Mul", []string{b.op("Unsqueeze", []string{b.toFloat("timestep"), b.ints(1)}), b.floatData([]int64{1, sd3.TimestepChannels / 2}, sd3.TimestepFrequencies())})
	t = b.op("Concat", []string{b.op("Cos", []string{t}), b.op("Sin", []string{t})}, onnxproto.IntAttr("axis", 1))
	t = m.mlp("time_text_embed.timestep_embedder.", t)
	pooled := m.mlp("time_text_embed.text_embedder.", b.toFloat("pooled_projections"))
	cond := m.silu(b.op("Add", []string{t, pooled})) // every modulation takes SiLU(temb)

	c := m.linear("context_embedder.", b.toFloat("encoder_hidden_states"))
	for i := range cfg.Layers {
		x, c = m.block(i, x, c, cond)
	}
	mod := m.chunks(m.linear("norm_out.linear.", cond), 2) // scale, shift
	x = m.modulate(m.layerNorm(x), mod[1], mod[0])
	x = m.linear("proj_out.", x) // [B, patches, p·p·C]

	// Unpatchify: [B, h, w, p, p, C] → [B, C, h·p, w·p].
	dims := b.op("Shape", []string{latent})
	batch := b.op("Gather", []string{dims, b.ints(0)})
	h := b.op("Div", []string{b.op("Gather", []string{dims, b.ints(2)}), b.ints(p)})
	wd := b.op("Div", []string{b.op("Gather", []string{dims, b.ints(3)}), b.ints(p)})
	six := b.op("Concat", []string{batch, h, wd, b.ints(p, p, int64(cfg.OutChannels))}, onnxproto.IntAttr("axis", 0))
	x = b.op("Transpose", []string{b.op("Reshape", []string{x, six})}, onnxproto.IntsAttr("perm", 0, 5, 1, 3, 2, 4))
	x = b.op("Reshape", []string{x, dims})
	b.output("out_hidden_states", x, param("batch_size"), fixed(int64(cfg.OutChannels)), param("height"), param("width"))
	return b.model()
}

type mmditGraph struct {
	weighted
	cfg sd3.MMDiTConfig
}

// croppedPositions is the centre of the position table the latent's
// patches cover, [1, patches, D].
func (m mmditGraph) croppedPositions(latent string) string {
	b, mx, d, p := m.graph, int64(m.cfg.PosEmbedMax), int64(m.cfg.Width()), int64(m.cfg.PatchSize)
	table := m.tensor("pos_embed.pos_embed", 1, mx, mx, d)
	dims := b.op("Shape", []string{latent})
	h := b.op("Div", []string{b.op("Gather", []string{dims, b.ints(2)}), b.ints(p)})
	w := b.op("Div", []string{b.op("Gather", []string{dims, b.ints(3)}), b.ints(p)})
	top := b.op("Div", []string{b.op("Sub", []string{b.ints(mx), h}), b.ints(2)})
	left := b.op("Div", []string{b.op("Sub", []string{b.ints(mx), w}), b.ints(2)})
	starts := b.op("Concat", []string{top, left}, onnxproto.IntAttr("axis", 0))
	ends := b.op("Concat", []string{b.op("Add", []string{top, h}), b.op("Add", []string{left, w})}, onnxproto.IntAttr("axis", 0))
	crop := b.op("Slice", []string{table, starts, ends, b.ints(1, 2)})
	return b.op("Reshape", []string{crop, b.ints(1, -1, d)})
}

// mlp is linear_1, SiLU, linear_2, as both of SD3's embedders.
func (m mmditGraph) mlp(prefix, x string) string {
	return m.linear(prefix+"linear_2.", m.silu(m.linear(prefix+"linear_1.", x)))
}

// chunks splits a modulation [B, k·D] into k pieces [B, 1, D].
func (m mmditGraph) chunks(x string, k int) []string {
	d := int64(m.cfg.Width())
	out := make([]string, k)
	for i := range out {
		s := m.op("Slice", []string{x, m.ints(int64(i) * d), m.ints(int64(i+1) * d), m.ints(1)})
		out[i] = m.op("Unsqueeze", []string{s, m.ints(1)})
	}
	return out
}

func (m mmditGraph) layerNorm(x string) string {
	d := m.cfg.Width()
	ones, zeros := make([]float32, d), make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	return m.op("LayerNormalization", []string{x, m.floatData([]int64{int64(d)}, ones), m.floatData([]int64{int64(d)}, zeros)},
		onnxproto.IntAttr("axis", -1), onnxproto.FloatAttr("epsilon", sd3.MMDiTNormEps))
}

// modulate is x·(1 + scale) + shift.
func (m mmditGraph) modulate(x, shift, scale string) string {
	return m.op("Add", []string{m.op("Mul", []string{x, m.op("Add", []string{m.floats(nil, 1), scale})}), shift})
}

// gelu is GELU's tanh approximation, as torch exports it.
func (m mmditGraph) gelu(x string) string {
	cube := m.op("Mul", []string{m.op("Mul", []string{x, x}), x})
	inner := m.op("Add", []string{x, m.op("Mul", []string{cube, m.floats(nil, 0.044715)})})
	t := m.op("Tanh", []string{m.op("Mul", []string{inner, m.floats(nil, float32(math.Sqrt(2/math.Pi)))})})
	return m.op("Mul", []string{m.op("Mul", []string{x, m.floats(nil, 0.5)}), m.op("Add", []string{t, m.floats(nil, 1)})})
}

func (m mmditGraph) feedForward(prefix, x string) string {
	return m.linear(prefix+"net.2.", m.gelu(m.linear(prefix+"net.0.proj.", x)))
}

// block is one JointTransformerBlock: image tokens x and text tokens c
// attend together; the last block updates x only.
func (m mmditGraph) block(i int, x, c, cond string) (string, string) {
	p, last := sd3.Block(i), m.cfg.ContextPreOnly(i)
	mx := m.chunks(m.linear(p+"norm1.linear.", cond), 6) // shift, scale, gate (attention); shift, scale, gate (feed-forward)
	nx := m.modulate(m.layerNorm(x), mx[0], mx[1])
	var mc []string
	var nc string
	if last {
		mc = m.chunks(m.linear(p+"norm1_context.linear.", cond), 2) // scale, shift
		nc = m.modulate(m.layerNorm(c), mc[1], mc[0])
	} else {
		mc = m.chunks(m.linear(p+"norm1_context.linear.", cond), 6)
		nc = m.modulate(m.layerNorm(c), mc[0], mc[1])
	}
	ax, ac := m.jointAttention(p+"attn.", nx, nc, last)
	x = m.op("Add", []string{x, m.op("Mul", []string{mx[2], ax})})
	x = m.op("Add", []string{x, m.op("Mul", []string{mx[5], m.feedForward(p+"ff.", m.modulate(m.layerNorm(x), mx[3], mx[4]))})})
	if last {
		return x, ""
	}
	c = m.op("Add", []string{c, m.op("Mul", []string{mc[2], ac})})
	c = m.op("Add", []string{c, m.op("Mul", []string{mc[5], m.feedForward(p+"ff_context.", m.modulate(m.layerNorm(c), mc[3], mc[4]))})})
	return x, c
}

// jointAttention attends over the image tokens then the text tokens, one
// sequence, and splits the result back.
func (m mmditGraph) jointAttention(p, x, c string, last bool) (string, string) {
	heads, hd := int64(m.cfg.Heads), int64(m.cfg.HeadDim)
	split := func(t string) string { // [B, N, D] → [B, heads, N, hd]
		return m.op("Transpose", []string{m.op("Reshape", []string{t, m.ints(0, 0, heads, hd)})}, onnxproto.IntsAttr("perm", 0, 2, 1, 3))
	}
	joint := func(img, txt string) string {
		return m.op("Concat", []string{split(m.linear(p+img, x)), split(m.linear(p+txt, c))}, onnxproto.IntAttr("axis", 2))
	}
	q, k, v := joint("to_q.", "add_q_proj."), joint("to_k.", "add_k_proj."), joint("to_v.", "add_v_proj.")
	scores := m.op("MatMul", []string{q, m.op("Transpose", []string{k}, onnxproto.IntsAttr("perm", 0, 1, 3, 2))})
	scores = m.op("Mul", []string{scores, m.floats(nil, float32(1/math.Sqrt(float64(hd))))})
	o := m.op("MatMul", []string{m.op("Softmax", []string{scores}, onnxproto.IntAttr("axis", -1)), v})
	o = m.op("Reshape", []string{m.op("Transpose", []string{o}, onnxproto.IntsAttr("perm", 0, 2, 1, 3)), m.ints(0, 0, heads*hd)})
	n := m.op("Gather", []string{m.op("Shape", []string{x}), m.ints(1)})
	ox := m.linear(p+"to_out.0.", m.op("Slice", []string{o, m.ints(0), n, m.ints(1)}))
	if last {
		return ox, ""
	}
	oc := m.op("Slice", []string{o, n, m.ints(math.MaxInt64), m.ints(1)})
	return ox, m.linear(p+"to_add_out.", oc)
}
