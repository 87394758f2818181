package ggmlimage

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// Transformer is SD3's MMDiT (diffusers' SD3Transformer2DModel): it
// predicts the flow velocity of latents given the text.
type Transformer struct {
	part *part
	cfg  sd3.MMDiTConfig
	// step is the graph of the last call, computed again for calls of its
	// shape (every step of an image): building, checking and laying out
	// SD3-medium's 2,900 operations at each step is host time the device
	// waits through (BenchmarkStepGraph), and CUDA replays the kernels of
	// a graph it has seen.
	step  *stepGraph
	fresh bool // Config.FreshStepGraphs: keep no step graph
	// context is the text's context embedding [D, seq, n] for the text
	// contextOf: every step of an image takes the same, so it is computed
	// when the text changes (a new image, or jobs joining a batch), not at
	// every step.
	context, contextOf []float32
}

// stepGraph is a transformer graph kept for calls of one shape, and its
// inputs.
type stepGraph struct {
	shape                          [4]int // n, h, w, text length
	g                              *tensor.Graph
	latents, context, pooled, temb tensor.Tensor
	out                            tensor.Tensor
}

// OpenTransformer loads a transformer GGUF written by internal/sd3 onto a
// CPU backend of its own.
func OpenTransformer(path string, threads int) (*Transformer, error) {
	return openTransformer(path, placement{threads: threads})
}

func openTransformer(path string, on placement) (*Transformer, error) {
	layout := func(c sd3.MMDiTConfig, be *tensor.Backend) tensor.Layout {
		l := tensor.Layout{Fusions: qkvFusions(c)}
		switch {
		case on.bfloat16:
			all := matrices(c, l.Fusions)
			l.BFloat16 = func(name string) bool { return all(name) && perToken(name) }
			if be.Device().BLAS != "" {
				l.Float32 = func(name string) bool { return all(name) && !perToken(name) }
			}
		case be.Device().BLAS != "":
			l.Float32 = matrices(c, l.Fusions)
		}
		return l
	}
	p, cfg, err := openPart(path, on, sd3.MMDiTConfigOf, sd3.MMDiTConfig.MMDiTTensors, layout)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	m := &Transformer{part: p, cfg: cfg, fresh: on.fresh}
	if err := m.shiftedBiases(); err != nil {
		m.Close()
		return nil, fmt.Errorf("transformer: %w", err)
	}
	return m, nil
}

// qkvFusions lays each block's query, key and value matrices side by side,
// the image's and the text's: one product makes all three, and the
// activations it multiplies are converted once, not three times.
func qkvFusions(c sd3.MMDiTConfig) []tensor.Fusion {
	var out []tensor.Fusion
	for i := range c.Layers {
		pre := sd3.Block(i) + "attn."
		out = append(out,
			tensor.Fusion{Name: pre + fusedImageQKV, Parts: []string{pre + "to_q.weight", pre + "to_k.weight", pre + "to_v.weight"}},
			tensor.Fusion{Name: pre + fusedTextQKV, Parts: []string{pre + "add_q_proj.weight", pre + "add_k_proj.weight", pre + "add_v_proj.weight"}})
	}
	return out
}

// matrices names the transformer's matrices, the fused ones among them:
// every one is a linear layer's, multiplied and nothing else (the patch
// embedding's kernel has four dimensions, the position table three).
func matrices(c sd3.MMDiTConfig, fusions []tensor.Fusion) func(string) bool {
	names := map[string]bool{}
	for _, s := range c.MMDiTTensors() {
		if len(s.Shape) == 2 {
			names[s.Name] = true
		}
	}
	for _, f := range fusions {
		names[f.Name] = true
	}
	return func(name string) bool { return names[name] }
}

// perToken says whether the matrix named name multiplies every token at
// every step: a block's attention and feed-forward matrices, which
// Config.BFloat16 keeps as bfloat16. The rest keep their precision: the
// adaLN matrices, which make each block's scales, shifts and gates from
// the timestep and the pooled text, where one value's rounding reaches
// every token (bfloat16 there doubled the step's difference from ONNX
// Runtime), and the embeddings and final projection, whose products are
// few or small.
func perToken(name string) bool {
	return strings.HasPrefix(name, "transformer_blocks.") && !strings.Contains(name, ".norm1")
}

// The names of a block's fused matrices (qkvFusions), after its prefix.
const (
	fusedImageQKV = "to_qkv.weight"
	fusedTextQKV  = "add_qkv_proj.weight"
)

// Config is the transformer's configuration, read from its file.
func (m *Transformer) Config() sd3.MMDiTConfig { return m.cfg }

// Close frees the weights; a nil Transformer is a no-op.
func (m *Transformer) Close() {
	if m != nil {
		m.dropStep()
		m.part.close()
	}
}

func (m *Transformer) dropStep() {
	if m.step != nil {
		m.step.g.Close()
		m.step = nil
	}
}

// TransformerInput is one call's batch of n items, in PyTorch's layouts.
type TransformerInput struct {
	Latents   []float32 // [n, C, h, w]
	N, H, W   int
	Text      []float32 // [n, seqLen, JointDim]
	SeqLen    int
	Pooled    []float32 // [n, PooledDim]
	Timesteps []float32 // [n]
}

// Predict returns the transformer's output for in, [n, C, h, w].
func (m *Transformer) Predict(in TransformerInput) ([]float32, error) {
	c := m.cfg
	switch {
	case in.H%c.PatchSize != 0 || in.W%c.PatchSize != 0:
		return nil, fmt.Errorf("transformer: latents %d×%d are not whole patches of %d", in.H, in.W, c.PatchSize)
	case in.H/c.PatchSize > c.PosEmbedMax || in.W/c.PatchSize > c.PosEmbedMax:
		return nil, fmt.Errorf("transformer: latents %d×%d are larger than the position table (%d patches)", in.H, in.W, c.PosEmbedMax)
	case len(in.Latents) != in.N*c.InChannels*in.H*in.W, len(in.Text) != in.N*in.SeqLen*c.JointDim,
		len(in.Pooled) != in.N*c.PooledDim, len(in.Timesteps) != in.N:
		return nil, fmt.Errorf("transformer: inputs do not match a batch of %d", in.N)
	}
	temb := make([]float32, 0, in.N*sd3.TimestepChannels)
	for _, t := range in.Timesteps {
		temb = append(temb, sd3.TimestepEmbedding(t)...)
	}
	m.part.mu.Lock()
	defer m.part.mu.Unlock()
	context, err := m.contextEmbedding(in)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	shape := [4]int{in.N, in.H, in.W, in.SeqLen}
	s := m.step
	if s != nil && !m.fresh && s.shape == shape && s.g.Current() {
		for _, set := range []struct {
			t    tensor.Tensor
			data []float32
		}{{s.latents, in.Latents}, {s.context, context}, {s.pooled, in.Pooled}, {s.temb, temb}} {
			if err := s.g.SetInput(set.t, set.data); err != nil {
				return nil, fmt.Errorf("transformer: %w", err)
			}
		}
	} else {
		m.dropStep()
		g := m.part.graph()
		s = &stepGraph{shape: shape, g: g,
			latents: g.Input(in.Latents, in.W, in.H, c.InChannels, in.N),
			context: g.Input(context, c.Width(), in.SeqLen, in.N),
			pooled:  g.Input(in.Pooled, c.PooledDim, in.N),
			temb:    g.Input(temb, sd3.TimestepChannels, in.N)}
		s.out = m.forward(g, s.latents, s.context, s.pooled, s.temb)
		m.step = s
	}
	out, err := s.g.Compute(s.out)
	if err != nil {
		m.dropStep()
		return nil, fmt.Errorf("transformer: %w", err)
	}
	return out, nil
}

// contextEmbedding is in's text through the context embedder, [D, seq,
// n]: computed in a graph of its own when the text is not the last call's
// (m.context). The step graph then is no longer the backend's current
// one and is built again, once an image.
func (m *Transformer) contextEmbedding(in TransformerInput) ([]float32, error) {
	// Compared as bytes: a memcmp a step over SD3's 2.7 million values,
	// ten times faster than comparing them one by one (0.16 against 1.5
	// ms on one core); a text that differs only in a zero's sign is
	// computed again, no harm.
	if m.context != nil && bytes.Equal(floatBytes(m.contextOf), floatBytes(in.Text)) {
		return m.context, nil
	}
	m.context, m.contextOf = nil, nil
	g := m.part.graph()
	defer g.Close()
	text := g.Input(in.Text, m.cfg.JointDim, in.SeqLen, in.N)
	out, err := g.Compute(m.part.linear(g, "context_embedder.", text))
	if err != nil {
		return nil, err
	}
	m.context, m.contextOf = out, slices.Clone(in.Text)
	return out, nil
}

// floatBytes is v's memory, as bytes.
func floatBytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// forward builds the step graph, from the context embedding txt [D, seq,
// n] (contextEmbedding).
func (m *Transformer) forward(g *tensor.Graph, latents, txt, pooled, temb tensor.Tensor) tensor.Tensor {
	p, c := m.part, m.cfg
	ps := c.PatchSize
	gw, gh, n := latents.Dim(0)/ps, latents.Dim(1)/ps, latents.Dim(3)

	x := m.patchEmbedding(g, latents) // [D, patches, n]
	x = x.Add(m.croppedPositions(g, gw, gh).Add(p.weight(g, "pos_embed.proj.bias")))

	t := m.mlp(g, "time_text_embed.timestep_embedder.", temb)
	t = t.Add(m.mlp(g, "time_text_embed.text_embedder.", pooled))
	cond := t.SILU() // every modulation takes SiLU(temb)

	for i := range c.Layers {
		x, txt = m.block(g, i, x, txt, cond)
	}
	x = m.modulation(p.linear(g, "norm_out.linear.", cond), 2).modulate(layerNorm(x), 1, 0) // scale, shift
	x = p.linear(g, "proj_out.", x)                                                         // [C·p·p, patches, n], C innermost

	// Unpatchify to [w·p, h·p, C, n] within ggml's four dimensions.
	ch := c.OutChannels
	x = x.Reshape(ch, ps*ps, gw, gh*n).Permute(3, 0, 1, 2).Contiguous() // [p·p, w, h·n, C]
	x = x.Reshape(ps, ps, gw, gh*n*ch).Permute(0, 2, 1, 3).Contiguous() // [p, w, p, h·n·C]
	x = x.Reshape(ps*gw*ps*gh, n, ch).Permute(0, 2, 1, 3).Contiguous()  // [pixels, C, n]
	return x.Reshape(gw*ps, gh*ps, ch, n)
}

// patchEmbedding is the patch embedding's convolution without its bias,
// [D, patches, n]: its patches do not overlap, so each is a vector laid
// out from the latents [w, h, C, n] by two copies of them (small: the
// latents), in the order of the kernel's values, and the convolution one
// product that leaves the tokens as the blocks take them, a row each.
func (m *Transformer) patchEmbedding(g *tensor.Graph, latents tensor.Tensor) tensor.Tensor {
	ps, d := m.cfg.PatchSize, m.cfg.Width()
	w, h, c, n := latents.Dim(0), latents.Dim(1), latents.Dim(2), latents.Dim(3)
	gw, gh := w/ps, h/ps
	// [dx, px, dy, py·C·n] to [dx, dy, px, py·C·n], then [dx·dy, px·py, C, n]
	// to [dx·dy, C, px·py, n]: a patch is (dx, dy, channel), the kernel's order.
	x := latents.Reshape(ps, gw, ps, gh*c*n).Permute(0, 2, 1, 3).Contiguous()
	x = x.Reshape(ps*ps, gw*gh, c, n).Permute(0, 2, 1, 3).Contiguous()
	k := m.part.weight(g, "pos_embed.proj.weight") // [p, p, C, D]
	return k.Reshape(ps*ps*c, d).MulMat(x.Reshape(ps*ps*c, gw*gh, n))
}

// croppedPositions is the centre of the position table that gw×gh
// patches cover, [D, patches].
func (m *Transformer) croppedPositions(g *tensor.Graph, gw, gh int) tensor.Tensor {
	mx, d := m.cfg.PosEmbedMax, m.cfg.Width()
	top, left := (mx-gh)/2, (mx-gw)/2
	pos := m.part.weight(g, "pos_embed.pos_embed").Reshape(d, mx, mx)
	pos = pos.Slice(1, left, left+gw).Slice(2, top, top+gh)
	return pos.Contiguous().Reshape(d, gw*gh)
}

func (m *Transformer) mlp(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	return m.part.linear(g, prefix+"linear_2.", m.part.linear(g, prefix+"linear_1.", x).SILU())
}

// modulation is an adaLN modulation [k·D, n] in k pieces [D, 1, n], and
// the same pieces plus one: views, which broadcast over the tokens, so a
// block's twelve pieces cost one small addition and no copies (each a
// kernel of its own on a GPU).
type modulation struct{ piece, plusOne []tensor.Tensor }

func (m *Transformer) modulation(x tensor.Tensor, k int) modulation {
	d := m.cfg.Width()
	split := func(x tensor.Tensor) []tensor.Tensor {
		out := make([]tensor.Tensor, k)
		for i := range out {
			out[i] = x.Slice(0, i*d, (i+1)*d).Unsqueeze(1)
		}
		return out
	}
	return modulation{piece: split(x), plusOne: split(x.ScaleBias(1, 1))}
}

// modulate is x·(1 + the scale piece) + the shift piece: two passes over
// x, not three.
func (mod modulation) modulate(x tensor.Tensor, shift, scale int) tensor.Tensor {
	return x.Mul(mod.plusOne[scale]).Add(mod.piece[shift])
}

// layerNorm is the transformer's LayerNorm, without weights.
func layerNorm(x tensor.Tensor) tensor.Tensor { return x.Norm(sd3.MMDiTNormEps) }

func (m *Transformer) feedForward(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	h := geluTanh(m.part.linear(g, prefix+"net.0.proj.", x))
	return m.part.linear(g, prefix+"net.2.", h)
}

// block is one JointTransformerBlock: image tokens x and text tokens txt
// attend together; the last block updates x only.
func (m *Transformer) block(g *tensor.Graph, i int, x, txt, cond tensor.Tensor) (tensor.Tensor, tensor.Tensor) {
	p, pre, last := m.part, sd3.Block(i), m.cfg.ContextPreOnly(i)
	mx := m.modulation(p.linear(g, pre+"norm1.linear.", cond), 6) // shift, scale, gate (attention); shift, scale, gate (feed-forward)
	nx := mx.modulate(layerNorm(x), 0, 1)
	var mc modulation
	var nc tensor.Tensor
	if last {
		mc = m.modulation(p.linear(g, pre+"norm1_context.linear.", cond), 2) // scale, shift
		nc = mc.modulate(layerNorm(txt), 1, 0)
	} else {
		mc = m.modulation(p.linear(g, pre+"norm1_context.linear.", cond), 6)
		nc = mc.modulate(layerNorm(txt), 0, 1)
	}
	ax, ac := m.jointAttention(g, pre+"attn.", nx, nc, last)
	x = x.Add(ax.Mul(mx.piece[2]))
	x = x.Add(m.feedForward(g, pre+"ff.", mx.modulate(layerNorm(x), 3, 4)).Mul(mx.piece[5]))
	if last {
		return x, txt
	}
	txt = txt.Add(ac.Mul(mc.piece[2]))
	txt = txt.Add(m.feedForward(g, pre+"ff_context.", mc.modulate(layerNorm(txt), 3, 4)).Mul(mc.piece[5]))
	return x, txt
}

// jointAttention attends over the image tokens then the text tokens, one
// sequence, and splits the result back; the last block's text is not
// computed (ac is the zero Tensor).
//
// The image's keys and values go to the attention as their product makes
// them, without their biases, which saves a pass over each: softmax does
// not change when each query's scores all move by one amount, so the image
// key bias's share, q·b_k, can come off every key's score (the text keys
// then take the difference of the two biases, tokens few); and since each
// query's weights sum to one, the image value bias comes out of the
// attention whole (the text values take the difference), and the output
// projections' biases take it in (shiftedBiases).
func (m *Transformer) jointAttention(g *tensor.Graph, pre string, x, txt tensor.Tensor, last bool) (ax, ac tensor.Tensor) {
	p, heads, hd := m.part, m.cfg.Heads, m.cfg.HeadDim
	d := hd * heads
	// img and text are products whose first D rows are the queries.
	var img, text tensor.Tensor
	var kv tensor.Keys
	if g.AttendsByProducts(hd, x.Dim(1)+txt.Dim(1)) {
		img, text, kv = m.keysForProducts(g, pre, x, txt, last)
	} else {
		img, text, kv = m.keysForFlash(g, pre, x, txt, last)
	}
	scale := 1 / math.Sqrt(float64(hd))
	attend := func(y tensor.Tensor, queryBias string) tensor.Tensor { // [D, tokens, n]
		return y.Slice(0, 0, d).Queries(p.weight(g, pre+queryBias), heads).Attend(kv, scale)
	}
	ax = p.weight(g, pre+"to_out.0.weight").MulMat(attend(img, "to_q.bias")).Add(p.weight(g, pre+shiftedImageOutBias))
	if last {
		return ax, tensor.Tensor{}
	}
	ac = p.weight(g, pre+"to_add_out.weight").MulMat(attend(text, "add_q_proj.bias")).Add(p.weight(g, pre+shiftedTextOutBias))
	return ax, ac
}

// keysForFlash: q, k and v of the image and of the text, each in one
// product with the three matrices side by side (qkvFusions), token by
// token; the keys and values joined [D, ni+nt+pad, n], with the padding
// the device's attention wants after the text, the smaller part, in the
// concatenation that joins them anyway. The last block's text product
// makes the keys and values only, from the fused matrix's last two
// thirds: its text queries are never read.
func (m *Transformer) keysForFlash(g *tensor.Graph, pre string, x, txt tensor.Tensor, last bool) (img, text tensor.Tensor, kv tensor.Keys) {
	p, heads, d := m.part, m.cfg.Heads, m.cfg.Width()
	ni, nt, n := x.Dim(1), txt.Dim(1), x.Dim(2)
	img = p.weight(g, pre+fusedImageQKV).MulMat(x) // [3·D, ni, n]
	textQKV, first := p.weight(g, pre+fusedTextQKV), 0
	if last {
		textQKV, first = textQKV.Slice(1, d, 3*d), 1
	}
	text = textQKV.MulMat(txt)
	third := func(y tensor.Tensor, i int) tensor.Tensor { return y.Slice(0, i*d, (i+1)*d) }
	pad := p.be.KeyPadding(ni + nt)
	joint := func(i int, textBias string) tensor.Tensor {
		t := third(text, i-first).Add(p.weight(g, pre+textBias))
		if pad > 0 {
			t = t.Concat(g.Zeros(d, pad, n), 1)
		}
		return third(img, i).Concat(t, 1)
	}
	return img, text, tensor.AttentionKeys(joint(1, shiftedTextKeyBias), joint(2, shiftedTextValueBias), ni+nt, heads)
}

// keysForProducts lays the keys and values out for attention as two
// products (tensor.AttendsByProducts) as their own products make them:
// queries and keys in one product each for the image and the text (the
// fused matrix's first two thirds; the last block's text, keys only),
// each's keys by head joined in one copy of rows; values from a product
// with its operands the other way round, the tokens times the matrix,
// which makes each value's tokens a row (tensor.TokensAlongRows), the
// layout the second product reads, so the values are never transposed.
// The text's values take their bias there, repeated along the tokens.
func (m *Transformer) keysForProducts(g *tensor.Graph, pre string, x, txt tensor.Tensor, last bool) (img, text tensor.Tensor, kv tensor.Keys) {
	p, heads, hd := m.part, m.cfg.Heads, m.cfg.HeadDim
	d, nt, n := hd*heads, txt.Dim(1), x.Dim(2)
	imgQKV, textQKV := p.weight(g, pre+fusedImageQKV), p.weight(g, pre+fusedTextQKV)
	img = imgQKV.Slice(1, 0, 2*d).MulMat(x) // [2·D, ni, n]
	var textKeys tensor.Tensor
	if last {
		textKeys = textQKV.Slice(1, d, 2*d).MulMat(txt)
	} else {
		text = textQKV.Slice(1, 0, 2*d).MulMat(txt)
		textKeys = text.Slice(0, d, 2*d)
	}
	k := img.Slice(0, d, 2*d).ByHead(heads).Concat(textKeys.Add(p.weight(g, pre+shiftedTextKeyBias)).ByHead(heads), 1)
	values := func(x, fused tensor.Tensor) tensor.Tensor { // [tokens, hd, heads, n]
		tokens := x.Dim(1)
		return x.Reshape(x.Dim(0), tokens*n).MulMat(fused.Slice(1, 2*d, 3*d)).TokensAlongRows(tokens, heads, n)
	}
	textBias := p.weight(g, pre+shiftedTextValueBias).RowsOf(nt).Reshape(nt, hd, heads, 1)
	vt := values(x, imgQKV).Concat(values(txt, textQKV).Add(textBias), 0)
	return img, text, tensor.ProductKeys(k, vt)
}

// The names of a block's biases shiftedBiases derives, after its
// attention's prefix.
const (
	shiftedTextKeyBias   = "add_k_proj.bias-to_k.bias"
	shiftedTextValueBias = "add_v_proj.bias-to_v.bias"
	shiftedImageOutBias  = "to_out.0.bias+to_v.bias"
	shiftedTextOutBias   = "to_add_out.bias+to_v.bias"
)

// shiftedBiases derives the biases jointAttention takes in place of the
// file's, once, at load: the text's key and value biases less the
// image's, and each output projection's bias plus its product with the
// image's value bias.
func (m *Transformer) shiftedBiases() error {
	return m.part.w.Derive(func(g *tensor.Graph) (names []string, out []tensor.Tensor) {
		for i := range m.cfg.Layers {
			pre := sd3.Block(i) + "attn."
			w := func(name string) tensor.Tensor { return m.part.weight(g, pre+name) }
			valueBias := w("to_v.bias")
			add := func(name string, t tensor.Tensor) {
				names = append(names, pre+name)
				out = append(out, t)
			}
			add(shiftedTextKeyBias, w("add_k_proj.bias").Sub(w("to_k.bias")))
			add(shiftedTextValueBias, w("add_v_proj.bias").Sub(valueBias))
			add(shiftedImageOutBias, w("to_out.0.bias").Add(w("to_out.0.weight").MulMat(valueBias)))
			if !m.cfg.ContextPreOnly(i) {
				add(shiftedTextOutBias, w("to_add_out.bias").Add(w("to_add_out.weight").MulMat(valueBias)))
			}
		}
		return names, out
	})
}
