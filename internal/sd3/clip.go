package sd3

import "fmt"

// CLIPConfig is the part of transformers' CLIPTextConfig (with projection)
// that SD3's text encoders need.
type CLIPConfig struct {
	Vocab, Positions          int
	Width, Layers, Heads, FFN int
	Projection                int
	QuickGELU                 bool // CLIP-L's activation; CLIP-G uses exact GELU
}

// CLIPNormEps is the layer norms' epsilon in CLIP.
const CLIPNormEps = 1e-5

// ClipL and ClipG are SD3-medium's two CLIP text encoders.
func ClipL() CLIPConfig {
	return CLIPConfig{Vocab: 49408, Positions: 77, Width: 768, Layers: 12, Heads: 12, FFN: 3072, Projection: 768, QuickGELU: true}
}

func ClipG() CLIPConfig {
	return CLIPConfig{Vocab: 49408, Positions: 77, Width: 1280, Layers: 32, Heads: 20, FFN: 5120, Projection: 1280}
}

// TinyCLIP is a CLIP of width w over the tiny export's vocabulary.
func TinyCLIP(vocab, width int, quickGELU bool) CLIPConfig {
	return CLIPConfig{Vocab: vocab, Positions: 77, Width: width, Layers: 2, Heads: 2, FFN: 4 * width, Projection: width, QuickGELU: quickGELU}
}

// Check reports a configuration the encoder cannot be built from.
func (c CLIPConfig) Check() error {
	for _, v := range []int{c.Vocab, c.Positions, c.Width, c.Layers, c.Heads, c.FFN, c.Projection} {
		if v <= 0 {
			return fmt.Errorf("clip config %+v: every size must be positive", c)
		}
	}
	if c.Width%c.Heads != 0 {
		return fmt.Errorf("clip config: width %d does not split into %d heads", c.Width, c.Heads)
	}
	return nil
}

// CLIPLayer is the prefix of encoder layer i's tensors.
func CLIPLayer(i int) string { return fmt.Sprintf("text_model.encoder.layers.%d.", i) }

// CLIPTensors lists every tensor of a CLIPTextModelWithProjection in
// transformers' names.
func (c CLIPConfig) CLIPTensors() []Spec {
	d := c.Width
	specs := []Spec{
		{"text_model.embeddings.token_embedding.weight", []int{c.Vocab, d}},
		{"text_model.embeddings.position_embedding.weight", []int{c.Positions, d}},
	}
	linear := func(prefix string, in, out int) {
		specs = append(specs, Spec{prefix + "weight", []int{out, in}}, Spec{prefix + "bias", []int{out}})
	}
	norm := func(prefix string) {
		specs = append(specs, Spec{prefix + "weight", []int{d}}, Spec{prefix + "bias", []int{d}})
	}
	for i := range c.Layers {
		p := CLIPLayer(i)
		norm(p + "layer_norm1.")
		for _, name := range []string{"q_proj.", "k_proj.", "v_proj.", "out_proj."} {
			linear(p+"self_attn."+name, d, d)
		}
		norm(p + "layer_norm2.")
		linear(p+"mlp.fc1.", d, c.FFN)
		linear(p+"mlp.fc2.", c.FFN, d)
	}
	norm("text_model.final_layer_norm.")
	return append(specs, Spec{"text_projection.weight", []int{c.Projection, d}})
}
