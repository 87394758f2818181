// Package sd3 describes Stable Diffusion 3's parts the way diffusers lays
// them out: their configurations, the name and shape of every tensor, and
// random weights in those shapes. Both engines build their graphs from it
// (ONNX for ONNX Runtime, GGUF for ggml), so a tiny model written once runs
// on both with the same numbers.
//
// Shapes are PyTorch's (outermost first). It is pure Go: commands that only
// write or convert models do not link an engine.
package sd3

import "fmt"

// VAEConfig is the part of diffusers' AutoencoderKL config that its decoder
// needs.
type VAEConfig struct {
	LatentChannels int
	BlockOut       []int // block_out_channels, from the image side
	LayersPerBlock int
	Groups         int // norm_num_groups
	Scaling, Shift float64
}

// The decoder's group norms all use diffusers' resnet epsilon.
const VAENormEps = 1e-6

// MediumVAE is SD3-medium's VAE.
func MediumVAE() VAEConfig {
	return VAEConfig{LatentChannels: 16, BlockOut: []int{128, 256, 512, 512}, LayersPerBlock: 2, Groups: 32, Scaling: 1.5305, Shift: 0.0609}
}

// TinyVAE has SD3's structure (four blocks, three upsamplings by 2, a mid
// attention) at widths small enough for tests.
func TinyVAE() VAEConfig {
	return VAEConfig{LatentChannels: 16, BlockOut: []int{8, 8, 16, 16}, LayersPerBlock: 1, Groups: 4, Scaling: 1.5305, Shift: 0.0609}
}

// MidVAE is SD3's VAE at a quarter of its widths, 32 to 128, with its
// groups of 4 channels: the size the image engines are compared at.
func MidVAE() VAEConfig {
	return VAEConfig{LatentChannels: 16, BlockOut: []int{32, 64, 128, 128}, LayersPerBlock: 2, Groups: 8, Scaling: 1.5305, Shift: 0.0609}
}

// Check reports a configuration the decoder cannot be built from.
func (c VAEConfig) Check() error {
	if c.LatentChannels <= 0 || len(c.BlockOut) == 0 || c.LayersPerBlock <= 0 || c.Groups <= 0 {
		return fmt.Errorf("vae config %+v: every size must be positive", c)
	}
	for _, ch := range c.BlockOut {
		if ch%c.Groups != 0 {
			return fmt.Errorf("vae config: %d channels do not split into %d groups", ch, c.Groups)
		}
	}
	return nil
}

// Upscale is how much the decoder enlarges the latents.
func (c VAEConfig) Upscale() int { return 1 << (len(c.BlockOut) - 1) }

// Spec is one tensor: its diffusers name and PyTorch shape.
type Spec struct {
	Name  string
	Shape []int
}

// Elements is how many values the tensor holds.
func (s Spec) Elements() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// VAEResnet names one ResnetBlock2D of the decoder and its widths.
type VAEResnet struct {
	Prefix  string
	In, Out int
}

// VAEUpBlock is one UpDecoderBlock2D: its resnets, then an upsampler unless
// it is the last.
type VAEUpBlock struct {
	Resnets  []VAEResnet
	Upsample string // the upsampler's prefix, "" for the last block
	Channels int
}

// MidResnets and UpBlocks walk the decoder in diffusers' order.
func (c VAEConfig) MidResnets() [2]VAEResnet {
	top := c.BlockOut[len(c.BlockOut)-1]
	return [2]VAEResnet{{"decoder.mid_block.resnets.0.", top, top}, {"decoder.mid_block.resnets.1.", top, top}}
}

// UpBlocks lists the decoder's up blocks, widest first.
func (c VAEConfig) UpBlocks() []VAEUpBlock {
	var blocks []VAEUpBlock
	prev := c.BlockOut[len(c.BlockOut)-1]
	for i := range c.BlockOut {
		out := c.BlockOut[len(c.BlockOut)-1-i]
		b := VAEUpBlock{Channels: out}
		for j := range c.LayersPerBlock + 1 {
			in := out
			if j == 0 {
				in = prev
			}
			b.Resnets = append(b.Resnets, VAEResnet{fmt.Sprintf("decoder.up_blocks.%d.resnets.%d.", i, j), in, out})
		}
		if i < len(c.BlockOut)-1 {
			b.Upsample = fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.", i)
		}
		blocks = append(blocks, b)
		prev = out
	}
	return blocks
}

// MidAttention is the prefix of the decoder's one attention block.
const MidAttention = "decoder.mid_block.attentions.0."

// VAEDecoderTensors lists every tensor of the decoder, in diffusers' names.
func (c VAEConfig) VAEDecoderTensors() []Spec {
	var specs []Spec
	conv := func(prefix string, in, out, k int) {
		specs = append(specs, Spec{prefix + "weight", []int{out, in, k, k}}, Spec{prefix + "bias", []int{out}})
	}
	norm := func(prefix string, ch int) {
		specs = append(specs, Spec{prefix + "weight", []int{ch}}, Spec{prefix + "bias", []int{ch}})
	}
	linear := func(prefix string, in, out int) {
		specs = append(specs, Spec{prefix + "weight", []int{out, in}}, Spec{prefix + "bias", []int{out}})
	}
	resnet := func(r VAEResnet) {
		norm(r.Prefix+"norm1.", r.In)
		conv(r.Prefix+"conv1.", r.In, r.Out, 3)
		norm(r.Prefix+"norm2.", r.Out)
		conv(r.Prefix+"conv2.", r.Out, r.Out, 3)
		if r.In != r.Out {
			conv(r.Prefix+"conv_shortcut.", r.In, r.Out, 1)
		}
	}
	top := c.BlockOut[len(c.BlockOut)-1]
	conv("decoder.conv_in.", c.LatentChannels, top, 3)
	mid := c.MidResnets()
	resnet(mid[0])
	norm(MidAttention+"group_norm.", top)
	for _, p := range []string{"to_q.", "to_k.", "to_v.", "to_out.0."} {
		linear(MidAttention+p, top, top)
	}
	resnet(mid[1])
	for _, b := range c.UpBlocks() {
		for _, r := range b.Resnets {
			resnet(r)
		}
		if b.Upsample != "" {
			conv(b.Upsample+"conv.", b.Channels, b.Channels, 3)
		}
	}
	norm("decoder.conv_norm_out.", c.BlockOut[0])
	conv("decoder.conv_out.", c.BlockOut[0], 3, 3)
	return specs
}
