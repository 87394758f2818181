package sd3

import (
	"fmt"
	"math"
)

// MMDiTConfig is the part of diffusers' SD3Transformer2DModel config the
// graph needs.
type MMDiTConfig struct {
	PatchSize, InChannels, OutChannels int
	Layers, Heads, HeadDim             int
	JointDim, PooledDim                int // widths of the text sequence and the pooled text embedding
	SampleSize, PosEmbedMax            int // the position table is PosEmbedMax² patches, centred on SampleSize/PatchSize
}

// MMDiTNormEps is the epsilon of every layer norm in the transformer.
const MMDiTNormEps = 1e-6

// TimestepChannels is the width of the sinusoidal timestep embedding.
const TimestepChannels = 256

// MediumMMDiT is SD3-medium's transformer.
func MediumMMDiT() MMDiTConfig {
	return MMDiTConfig{PatchSize: 2, InChannels: 16, OutChannels: 16, Layers: 24, Heads: 24, HeadDim: 64,
		JointDim: 4096, PooledDim: 2048, SampleSize: 128, PosEmbedMax: 192}
}

// TinyMMDiT has SD3's structure at the tiny export's widths: its text
// sequence is T5's width (24), its pooled embedding CLIP-L's and CLIP-G's
// side by side (8+12). The position table covers images to 1536 pixels,
// as SD3-medium's does.
func TinyMMDiT() MMDiTConfig {
	return MMDiTConfig{PatchSize: 2, InChannels: 16, OutChannels: 16, Layers: 2, Heads: 2, HeadDim: 8,
		JointDim: 24, PooledDim: 20, SampleSize: 64, PosEmbedMax: 96}
}

// MidMMDiT is TinyMMDiT with SD3's head width and enough blocks and heads
// that compute, not the cost of each operation, sets an engine's speed:
// the size the image engines are compared at (make bench).
func MidMMDiT() MMDiTConfig {
	c := TinyMMDiT()
	c.Layers, c.Heads, c.HeadDim = 4, 6, 64
	return c
}

// Width is the transformer's hidden width.
func (c MMDiTConfig) Width() int { return c.Heads * c.HeadDim }

// Check reports a configuration the transformer cannot be built from.
func (c MMDiTConfig) Check() error {
	for _, v := range []int{c.PatchSize, c.InChannels, c.OutChannels, c.Layers, c.Heads, c.HeadDim, c.JointDim, c.PooledDim, c.SampleSize, c.PosEmbedMax} {
		if v <= 0 {
			return fmt.Errorf("transformer config %+v: every size must be positive", c)
		}
	}
	if c.HeadDim%2 != 0 || c.Width()%4 != 0 {
		return fmt.Errorf("transformer config: width %d cannot hold a 2-D sine table", c.Width())
	}
	return nil
}

// Block is the prefix of transformer block i's tensors.
func Block(i int) string { return fmt.Sprintf("transformer_blocks.%d.", i) }

// ContextPreOnly tells whether block i is the last, which updates the
// image tokens only: its text side has a 2-way modulation and no output
// projection or feed-forward.
func (c MMDiTConfig) ContextPreOnly(i int) bool { return i == c.Layers-1 }

// MMDiTTensors lists every tensor of the transformer in diffusers' names.
func (c MMDiTConfig) MMDiTTensors() []Spec {
	d := c.Width()
	var specs []Spec
	linear := func(prefix string, in, out int) {
		specs = append(specs, Spec{prefix + "weight", []int{out, in}}, Spec{prefix + "bias", []int{out}})
	}
	specs = append(specs,
		Spec{"pos_embed.proj.weight", []int{d, c.InChannels, c.PatchSize, c.PatchSize}}, Spec{"pos_embed.proj.bias", []int{d}},
		Spec{"pos_embed.pos_embed", []int{1, c.PosEmbedMax * c.PosEmbedMax, d}})
	linear("time_text_embed.timestep_embedder.linear_1.", TimestepChannels, d)
	linear("time_text_embed.timestep_embedder.linear_2.", d, d)
	linear("time_text_embed.text_embedder.linear_1.", c.PooledDim, d)
	linear("time_text_embed.text_embedder.linear_2.", d, d)
	linear("context_embedder.", c.JointDim, d)
	for i := range c.Layers {
		p := Block(i)
		last := c.ContextPreOnly(i)
		linear(p+"norm1.linear.", d, 6*d)
		if last {
			linear(p+"norm1_context.linear.", d, 2*d)
		} else {
			linear(p+"norm1_context.linear.", d, 6*d)
		}
		for _, name := range []string{"to_q.", "to_k.", "to_v.", "add_q_proj.", "add_k_proj.", "add_v_proj.", "to_out.0."} {
			linear(p+"attn."+name, d, d)
		}
		linear(p+"ff.net.0.proj.", d, 4*d)
		linear(p+"ff.net.2.", 4*d, d)
		if !last {
			linear(p+"attn.to_add_out.", d, d)
			linear(p+"ff_context.net.0.proj.", d, 4*d)
			linear(p+"ff_context.net.2.", 4*d, d)
		}
	}
	linear("norm_out.linear.", d, 2*d)
	linear("proj_out.", d, c.PatchSize*c.PatchSize*c.OutChannels)
	return specs
}

// RandomMMDiTWeights draws the transformer's weights from seed, with the
// position table SD3 ships (sine and cosine, not learned).
func (c MMDiTConfig) RandomMMDiTWeights(seed int64) Weights {
	w := RandomWeights(c.MMDiTTensors(), seed)
	for name, t := range c.fixedTensors() {
		w[name] = t
	}
	return w
}

// RandomMMDiTSource is RandomMMDiTWeights drawn one tensor at a time.
func (c MMDiTConfig) RandomMMDiTSource(seed int64) RandomSource {
	return RandomSource{Specs: c.MMDiTTensors(), Seed: seed, Fixed: c.fixedTensors()}
}

func (c MMDiTConfig) fixedTensors() Weights {
	return Weights{"pos_embed.pos_embed": {Shape: []int{1, c.PosEmbedMax * c.PosEmbedMax, c.Width()}, Data: c.PosTable()}}
}

// PosTable is diffusers' get_2d_sincos_pos_embed for the whole table: row
// r·M+col holds the sines and cosines of col (first half of the width)
// and of r (second half), both scaled so that SampleSize/PatchSize patches
// span the base grid.
func (c MMDiTConfig) PosTable() []float32 {
	m, d := c.PosEmbedMax, c.Width()
	base := float64(c.SampleSize / c.PatchSize)
	quarter := d / 4
	out := make([]float32, m*m*d)
	oneD := func(dst []float32, pos float64) {
		for i := range quarter {
			omega := 1 / math.Pow(10000, float64(i)/float64(quarter))
			dst[i] = float32(math.Sin(pos * omega))
			dst[quarter+i] = float32(math.Cos(pos * omega))
		}
	}
	for r := range m {
		for col := range m {
			row := out[(r*m+col)*d:]
			oneD(row[:d/2], float64(col)/(float64(m)/base))
			oneD(row[d/2:], float64(r)/(float64(m)/base))
		}
	}
	return out
}

// TimestepEmbedding is diffusers' Timesteps(256, flip_sin_to_cos=True,
// downscale_freq_shift=0) of one timestep: cosines, then sines, of t
// times frequencies from 1 down to 1/10000, in float32 as torch computes
// them.
func TimestepEmbedding(t float32) []float32 {
	freqs := TimestepFrequencies()
	half := len(freqs)
	out := make([]float32, 2*half)
	for i, f := range freqs {
		arg := float64(t * f)
		out[i] = float32(math.Cos(arg))
		out[half+i] = float32(math.Sin(arg))
	}
	return out
}

// TimestepFrequencies are the frequencies of TimestepEmbedding.
func TimestepFrequencies() []float32 {
	half := TimestepChannels / 2
	freqs := make([]float32, half)
	for i := range freqs {
		exponent := float32(-math.Log(10000)) * float32(i) / float32(half)
		freqs[i] = float32(math.Exp(float64(exponent)))
	}
	return freqs
}
