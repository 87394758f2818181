package ggmlimage

import (
	"fmt"
	"math"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// VAEDecoder is SD3's AutoencoderKL decoder: latents to pixels in [-1, 1]
// (before clamping), as diffusers' vae.decode.
type VAEDecoder struct {
	part *part
	cfg  sd3.VAEConfig
}

// OpenVAEDecoder loads a VAE decoder GGUF written by internal/sd3 onto a
// CPU backend of its own.
func OpenVAEDecoder(path string, threads int) (*VAEDecoder, error) {
	return openVAEDecoder(path, placement{threads: threads})
}

func openVAEDecoder(path string, on placement) (*VAEDecoder, error) {
	var layout func(sd3.VAEConfig, *tensor.Backend) tensor.Layout
	if on.bfloat16 {
		layout = kernelsInBFloat16
	}
	p, cfg, err := openPart(path, on, sd3.VAEConfigOf, sd3.VAEConfig.VAEDecoderTensors, layout)
	if err != nil {
		return nil, fmt.Errorf("vae decoder: %w", err)
	}
	return &VAEDecoder{part: p, cfg: cfg}, nil
}

// kernelsInBFloat16 keeps the 3×3 convolutions' float16 kernels as
// bfloat16 on the CPU: Conv3x3ChannelsLast then takes its windows as
// bfloat16 too, and a CPU with AVX512_BF16 multiplies them with its
// bfloat16 dot products, where float16 values are converted in its
// registers first. The convolutions are most of the decoder's time
// (docs/benchmarks.md). CUDA keeps float16: its
// windows are float32 (Conv3x3ChannelsLast), and bfloat16 there is
// unmeasured.
func kernelsInBFloat16(c sd3.VAEConfig, be *tensor.Backend) tensor.Layout {
	if be.Device().Kind != tensor.DeviceCPU {
		return tensor.Layout{}
	}
	kernels := map[string]bool{}
	for _, s := range c.VAEDecoderTensors() {
		if len(s.Shape) == 4 && s.Shape[2] == 3 && s.Shape[3] == 3 {
			kernels[s.Name] = true
		}
	}
	// The first and last keep float16. conv_in's windows (9 × 16 latent
	// channels) are not the multiple of 32 values tinyBLAS's bfloat16
	// products take, and conv_out makes the pixels themselves: its error
	// reaches them whole. Kept so, the mid image's largest difference from
	// ONNX Runtime's fell by a level, at no cost in time.
	delete(kernels, "decoder.conv_in.weight")
	delete(kernels, "decoder.conv_out.weight")
	return tensor.Layout{BFloat16: func(name string) bool { return kernels[name] }}
}

// Config is the decoder's configuration, read from its file.
func (d *VAEDecoder) Config() sd3.VAEConfig { return d.cfg }

// Close frees the weights; a nil VAEDecoder is a no-op.
func (d *VAEDecoder) Close() {
	if d != nil {
		d.part.close()
	}
}

// Decode turns n latents [n, C, h, w] (already unscaled: x/scaling + shift)
// into n images [n, 3, h·s, w·s], s the decoder's upscale.
func (d *VAEDecoder) Decode(latents []float32, n, h, w int) ([]float32, error) {
	if want := n * d.cfg.LatentChannels * h * w; len(latents) != want {
		return nil, fmt.Errorf("vae decoder: %d latent values for %d×%d×%d×%d", len(latents), n, d.cfg.LatentChannels, h, w)
	}
	d.part.mu.Lock()
	defer d.part.mu.Unlock()
	g := d.part.graph()
	defer g.Close()
	out, err := g.Compute(d.forward(g, g.Input(latents, w, h, d.cfg.LatentChannels, n)))
	if err != nil {
		return nil, fmt.Errorf("vae decoder: %w", err)
	}
	return out, nil
}

// The decoder runs channels-last, [C, W, H, N]: a channel's weight or bias
// is then one value a row, added or multiplied as a row (ggml broadcasts a
// value a row of channels-first data one element at a time), a 1×1
// convolution is one matrix product, and Conv3x3ChannelsLast needs no
// copy of its input but its padding. Only GroupNorm's statistics are taken
// channels-first, where a group is one contiguous row.

func (d *VAEDecoder) forward(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	cfg := d.cfg
	x = d.conv3x3(g, "decoder.conv_in.", channelsLast(x))
	mid := cfg.MidResnets()
	x = d.resnet(g, mid[0], x)
	x = d.attention(g, x)
	x = d.resnet(g, mid[1], x)
	for _, b := range cfg.UpBlocks() {
		for _, r := range b.Resnets {
			x = d.resnet(g, r, x)
		}
		if b.Upsample != "" {
			x = x.UpscaleNearest([4]int{x.Dim(0), 2 * x.Dim(1), 2 * x.Dim(2), x.Dim(3)})
			x = d.conv3x3(g, b.Upsample+"conv.", x)
		}
	}
	x = d.conv3x3(g, "decoder.conv_out.", d.groupNorm(g, "decoder.conv_norm_out.", x).SILU())
	return x.Permute(2, 0, 1, 3).Contiguous() // channels-first, as the pipeline takes pixels
}

// resnet is diffusers' ResnetBlock2D without a time embedding.
func (d *VAEDecoder) resnet(g *tensor.Graph, r sd3.VAEResnet, x tensor.Tensor) tensor.Tensor {
	h := d.conv3x3(g, r.Prefix+"conv1.", d.groupNorm(g, r.Prefix+"norm1.", x).SILU())
	h = d.conv3x3(g, r.Prefix+"conv2.", d.groupNorm(g, r.Prefix+"norm2.", h).SILU())
	if r.In != r.Out {
		x = d.conv1x1(g, r.Prefix+"conv_shortcut.", x)
	}
	return x.Add(h)
}

// groupNorm is torch's GroupNorm: each group of C/groups channels is
// normalized over its channels and pixels together. The statistics are
// the groups' sums and sums of squares (tensor.GroupSums); the variance
// is E[x²] − E[x]². Normalization and the weight and bias then make one
// scale and one shift a channel, applied channels-last.
func (d *VAEDecoder) groupNorm(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	p, groups := d.part, d.cfg.Groups
	c, w, h, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	per := c / groups
	sums, squares := x.Reshape(c, w*h, n).GroupSums(groups)
	count := float64(w * h * per)
	mean := sums.Scale(1 / count) // [groups·N]
	variance := squares.Scale(1 / count).Sub(mean.Sqr())
	perChannel := func(t tensor.Tensor) tensor.Tensor { // [groups·N] to [C, 1, 1, N]
		return t.Reshape(1, groups, n).Repeat(per, groups, n).Reshape(c, 1, 1, n)
	}
	scale := p.weight(g, prefix+"weight").Reshape(c, 1, 1, 1).Repeat(c, 1, 1, n).Div(perChannel(variance.ScaleBias(1, sd3.VAENormEps).Sqrt()))
	shift := p.weight(g, prefix+"bias").Reshape(c, 1, 1, 1).Repeat(c, 1, 1, n).Sub(perChannel(mean).Mul(scale))
	return x.Mul(scale).Add(shift)
}

// conv3x3 is torch's Conv2d of kernel 3, padding 1, with bias.
func (d *VAEDecoder) conv3x3(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	p := d.part
	return p.weight(g, prefix+"weight").Conv3x3ChannelsLast(x).Add(p.weight(g, prefix+"bias"))
}

// conv1x1 is torch's Conv2d of kernel 1, with bias: a matrix product over
// the channels.
func (d *VAEDecoder) conv1x1(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	p := d.part
	cin, w, h, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	k := p.weight(g, prefix+"weight")
	cout := k.Dim(3)
	y := k.Reshape(cin, cout).MulMat(x.Reshape(cin, w*h*n)).Add(p.weight(g, prefix+"bias"))
	return y.Reshape(cout, w, h, n)
}

// channelsLast lays [W, H, C, N] out as [C, W, H, N].
func channelsLast(x tensor.Tensor) tensor.Tensor { return x.Permute(1, 2, 0, 3).Contiguous() }

// attention is the mid block's single-head self-attention over the pixels,
// with a residual connection.
func (d *VAEDecoder) attention(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	p := d.part
	c, w, h, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	y := d.groupNorm(g, sd3.MidAttention+"group_norm.", x).Reshape(c, w*h, n) // [C, pixels, N]
	q := p.linear(g, sd3.MidAttention+"to_q.", y)
	k := p.linear(g, sd3.MidAttention+"to_k.", y)
	v := p.linear(g, sd3.MidAttention+"to_v.", y)
	// ggml's flash attention, one head: the scores of every pixel pair
	// would be 1 GiB at SD3's 128×128 latents.
	o := q.Queries(tensor.Tensor{}, 1).Attend(tensor.AttentionKeys(k, v, w*h, 1), 1/math.Sqrt(float64(c))) // [C, pixels, N]
	o = p.linear(g, sd3.MidAttention+"to_out.0.", o)
	return x.Add(o.Reshape(c, w, h, n))
}
