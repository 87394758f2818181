package ggmlimage

import (
	"context"
	"fmt"
	"math"

	"github.com/ollama/ollama/ml"

	"github.com/genq/genq/internal/sd3"
)

// Transformer is SD3's MMDiT (diffusers' SD3Transformer2DModel): it
// predicts the flow velocity of latents given the text.
type Transformer struct {
	part *part
	cfg  sd3.MMDiTConfig
}

// OpenTransformer loads a transformer GGUF written by internal/sd3.
func OpenTransformer(ctx context.Context, path string, threads int) (*Transformer, error) {
	return openTransformer(ctx, path, loadOptions{threads: threads})
}

func openTransformer(ctx context.Context, path string, opts loadOptions) (*Transformer, error) {
	p, cfg, err := openPart(ctx, path, opts, sd3.MMDiTConfigOf, sd3.MMDiTConfig.MMDiTTensors)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	return &Transformer{part: p, cfg: cfg}, nil
}

// Config is the transformer's configuration, read from its file.
func (m *Transformer) Config() sd3.MMDiTConfig { return m.cfg }

// Close frees the weights; a nil Transformer is a no-op.
func (m *Transformer) Close() {
	if m != nil {
		m.part.close()
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
func (m *Transformer) Predict(in TransformerInput) (out []float32, err error) {
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
	m.part.mu.Lock()
	defer m.part.mu.Unlock()
	defer recoverError(&err)
	ctx := m.part.backend.NewContext()
	defer ctx.Close()
	temb := make([]float32, 0, in.N*sd3.TimestepChannels)
	for _, t := range in.Timesteps {
		temb = append(temb, sd3.TimestepEmbedding(t)...)
	}
	input := ctx.Input()
	// The keys are padded to a multiple of keyPadding, masked off: ggml's
	// fast CPU matrix kernel needs the inner dimension of the attention's
	// second product (the keys) to be such a multiple, and the slow one
	// costs several times more.
	tokens := (in.H/c.PatchSize)*(in.W/c.PatchSize) + in.SeqLen
	var keyMask ml.Tensor
	if padded := (tokens + keyPadding - 1) / keyPadding * keyPadding; padded > tokens {
		mask := make([]float32, padded)
		for i := tokens; i < padded; i++ {
			mask[i] = float32(math.Inf(-1))
		}
		keyMask = input.FromFloats(mask, padded, 1)
	}
	y := m.forward(ctx,
		input.FromFloats(in.Latents, in.W, in.H, c.InChannels, in.N),
		input.FromFloats(in.Text, c.JointDim, in.SeqLen, in.N),
		input.FromFloats(in.Pooled, c.PooledDim, in.N),
		input.FromFloats(temb, sd3.TimestepChannels, in.N), keyMask)
	ctx.Forward(y).Compute(y)
	return y.Floats(), nil
}

// keyPadding is the multiple the attention's keys are padded to.
const keyPadding = 32

// forward builds the graph; keyMask, when not nil, masks the padded keys
// off (0 for a token, −∞ for padding).
func (m *Transformer) forward(ctx ml.Context, latents, text, pooled, temb, keyMask ml.Tensor) ml.Tensor {
	p, c := m.part, m.cfg
	d, ps := c.Width(), c.PatchSize
	gw, gh, n := latents.Dim(0)/ps, latents.Dim(1)/ps, latents.Dim(3)

	x := p.weight("pos_embed.proj.weight").Conv2D(ctx, latents, ps, ps, 0, 0, 1, 1)
	x = x.Add(ctx, p.weight("pos_embed.proj.bias").Reshape(ctx, 1, 1, d))
	x = x.Reshape(ctx, gw*gh, d, n).Permute(ctx, 1, 0, 2, 3).Contiguous(ctx) // [D, patches, n]
	x = x.Add(ctx, m.croppedPositions(ctx, gw, gh))

	t := m.mlp(ctx, "time_text_embed.timestep_embedder.", temb)
	t = t.Add(ctx, m.mlp(ctx, "time_text_embed.text_embedder.", pooled))
	cond := t.SILU(ctx) // every modulation takes SiLU(temb)

	txt := p.linear(ctx, "context_embedder.", text) // [D, seq, n]
	for i := range c.Layers {
		x, txt = m.block(ctx, i, x, txt, cond, keyMask)
	}
	mod := m.chunks(ctx, p.linear(ctx, "norm_out.linear.", cond), 2) // scale, shift
	x = modulate(ctx, layerNorm(ctx, x), mod[1], mod[0])
	x = p.linear(ctx, "proj_out.", x) // [C·p·p, patches, n], C innermost

	// Unpatchify to [w·p, h·p, C, n] within ggml's four dimensions.
	ch := c.OutChannels
	x = x.Reshape(ctx, ch, ps*ps, gw, gh*n).Permute(ctx, 3, 0, 1, 2).Contiguous(ctx) // [p·p, w, h·n, C]
	x = x.Reshape(ctx, ps, ps, gw, gh*n*ch).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx) // [p, w, p, h·n·C]
	x = x.Reshape(ctx, ps*gw*ps*gh, n, ch).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)  // [pixels, C, n]
	return x.Reshape(ctx, gw*ps, gh*ps, ch, n)
}

// croppedPositions is the centre of the position table that gw×gh
// patches cover, [D, patches].
func (m *Transformer) croppedPositions(ctx ml.Context, gw, gh int) ml.Tensor {
	mx, d := m.cfg.PosEmbedMax, m.cfg.Width()
	top, left := (mx-gh)/2, (mx-gw)/2
	pos := m.part.weight("pos_embed.pos_embed").Reshape(ctx, d, mx, mx)
	pos = pos.Slice(ctx, 1, left, left+gw, 1).Slice(ctx, 2, top, top+gh, 1)
	return pos.Contiguous(ctx).Reshape(ctx, d, gw*gh)
}

func (m *Transformer) mlp(ctx ml.Context, prefix string, x ml.Tensor) ml.Tensor {
	return m.part.linear(ctx, prefix+"linear_2.", m.part.linear(ctx, prefix+"linear_1.", x).SILU(ctx))
}

// chunks splits a modulation [k·D, n] into k pieces [D, 1, n], which
// broadcast over the tokens.
func (m *Transformer) chunks(ctx ml.Context, x ml.Tensor, k int) []ml.Tensor {
	d, n := m.cfg.Width(), x.Dim(1)
	out := make([]ml.Tensor, k)
	for i := range out {
		out[i] = x.Slice(ctx, 0, i*d, (i+1)*d, 1).Contiguous(ctx).Reshape(ctx, d, 1, n)
	}
	return out
}

func layerNorm(ctx ml.Context, x ml.Tensor) ml.Tensor {
	return x.LayerNorm(ctx, nil, nil, sd3.MMDiTNormEps)
}

// modulate is x·(1 + scale) + shift.
func modulate(ctx ml.Context, x, shift, scale ml.Tensor) ml.Tensor {
	return x.Add(ctx, x.Mul(ctx, scale)).Add(ctx, shift)
}

func (m *Transformer) feedForward(ctx ml.Context, prefix string, x ml.Tensor) ml.Tensor {
	h := geluTanh(ctx, m.part.linear(ctx, prefix+"net.0.proj.", x))
	return m.part.linear(ctx, prefix+"net.2.", h)
}

// block is one JointTransformerBlock: image tokens x and text tokens txt
// attend together; the last block updates x only.
func (m *Transformer) block(ctx ml.Context, i int, x, txt, cond, keyMask ml.Tensor) (ml.Tensor, ml.Tensor) {
	p, pre, last := m.part, sd3.Block(i), m.cfg.ContextPreOnly(i)
	mx := m.chunks(ctx, p.linear(ctx, pre+"norm1.linear.", cond), 6) // shift, scale, gate (attention); shift, scale, gate (feed-forward)
	nx := modulate(ctx, layerNorm(ctx, x), mx[0], mx[1])
	var mc []ml.Tensor
	var nc ml.Tensor
	if last {
		mc = m.chunks(ctx, p.linear(ctx, pre+"norm1_context.linear.", cond), 2) // scale, shift
		nc = modulate(ctx, layerNorm(ctx, txt), mc[1], mc[0])
	} else {
		mc = m.chunks(ctx, p.linear(ctx, pre+"norm1_context.linear.", cond), 6)
		nc = modulate(ctx, layerNorm(ctx, txt), mc[0], mc[1])
	}
	ax, ac := m.jointAttention(ctx, pre+"attn.", nx, nc, keyMask, last)
	x = x.Add(ctx, ax.Mul(ctx, mx[2]))
	x = x.Add(ctx, m.feedForward(ctx, pre+"ff.", modulate(ctx, layerNorm(ctx, x), mx[3], mx[4])).Mul(ctx, mx[5]))
	if last {
		return x, nil
	}
	txt = txt.Add(ctx, ac.Mul(ctx, mc[2]))
	txt = txt.Add(ctx, m.feedForward(ctx, pre+"ff_context.", modulate(ctx, layerNorm(ctx, txt), mc[3], mc[4])).Mul(ctx, mc[5]))
	return x, txt
}

// jointAttention attends over the image tokens then the text tokens, one
// sequence, and splits the result back.
func (m *Transformer) jointAttention(ctx ml.Context, pre string, x, txt, keyMask ml.Tensor, last bool) (ml.Tensor, ml.Tensor) {
	p, heads, hd := m.part, m.cfg.Heads, m.cfg.HeadDim
	ni, nt, n := x.Dim(1), txt.Dim(1), x.Dim(2)
	joint := func(img, text string) ml.Tensor { // [hd, heads, ni+nt, n]
		a := p.linear(ctx, pre+img, x).Reshape(ctx, hd, heads, ni, n)
		b := p.linear(ctx, pre+text, txt).Reshape(ctx, hd, heads, nt, n)
		return a.Concat(ctx, b, 2)
	}
	q := joint("to_q.", "add_q_proj.").Permute(ctx, 0, 2, 1, 3).Contiguous(ctx) // [hd, tokens, heads, n]; contiguous for the fast matrix kernel
	k, v := joint("to_k.", "add_k_proj."), joint("to_v.", "add_v_proj.")
	if keyMask != nil {
		pad := keyMask.Dim(0) - (ni + nt)
		k, v = k.Pad(ctx, 0, 0, pad, 0), v.Pad(ctx, 0, 0, pad, 0)
	}
	k = k.Permute(ctx, 0, 2, 1, 3).Contiguous(ctx)
	v = v.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx) // [keys, hd, heads, n]
	scores := k.Mulmat(ctx, q).Scale(ctx, 1/math.Sqrt(float64(hd)))
	if keyMask != nil {
		scores = scores.Add(ctx, keyMask)
	}
	scores = scores.Softmax(ctx)                                        // [keys, queries, heads, n]
	o := v.Mulmat(ctx, scores).Permute(ctx, 0, 2, 1, 3).Contiguous(ctx) // [hd, heads, queries, n]
	o = o.Reshape(ctx, hd*heads, ni+nt, n)
	ox := p.linear(ctx, pre+"to_out.0.", o.Slice(ctx, 1, 0, ni, 1).Contiguous(ctx))
	if last {
		return ox, nil
	}
	return ox, p.linear(ctx, pre+"to_add_out.", o.Slice(ctx, 1, ni, ni+nt, 1).Contiguous(ctx))
}
