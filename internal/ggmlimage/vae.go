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
	p, cfg, err := openPart(path, on, sd3.VAEConfigOf, sd3.VAEConfig.VAEDecoderTensors)
	if err != nil {
		return nil, fmt.Errorf("vae decoder: %w", err)
	}
	return &VAEDecoder{part: p, cfg: cfg}, nil
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

func (d *VAEDecoder) forward(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	p, cfg := d.part, d.cfg
	x = p.conv(g, "decoder.conv_in.", x, 1)
	mid := cfg.MidResnets()
	x = d.resnet(g, mid[0], x)
	x = d.attention(g, x)
	x = d.resnet(g, mid[1], x)
	for _, b := range cfg.UpBlocks() {
		for _, r := range b.Resnets {
			x = d.resnet(g, r, x)
		}
		if b.Upsample != "" {
			x = x.UpscaleNearest([4]int{2 * x.Dim(0), 2 * x.Dim(1), x.Dim(2), x.Dim(3)})
			x = p.conv(g, b.Upsample+"conv.", x, 1)
		}
	}
	x = p.groupNorm(g, "decoder.conv_norm_out.", x, cfg.Groups, sd3.VAENormEps).SILU()
	return p.conv(g, "decoder.conv_out.", x, 1)
}

// resnet is diffusers' ResnetBlock2D without a time embedding.
func (d *VAEDecoder) resnet(g *tensor.Graph, r sd3.VAEResnet, x tensor.Tensor) tensor.Tensor {
	p, groups := d.part, d.cfg.Groups
	h := p.groupNorm(g, r.Prefix+"norm1.", x, groups, sd3.VAENormEps).SILU()
	h = p.conv(g, r.Prefix+"conv1.", h, 1)
	h = p.groupNorm(g, r.Prefix+"norm2.", h, groups, sd3.VAENormEps).SILU()
	h = p.conv(g, r.Prefix+"conv2.", h, 1)
	if r.In != r.Out {
		x = p.conv(g, r.Prefix+"conv_shortcut.", x, 0)
	}
	return x.Add(h)
}

// attention is the mid block's single-head self-attention over the pixels,
// with a residual connection.
func (d *VAEDecoder) attention(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	p := d.part
	w, h, c, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	y := p.groupNorm(g, sd3.MidAttention+"group_norm.", x, d.cfg.Groups, sd3.VAENormEps)
	y = y.Reshape(w*h, c, n).Permute(1, 0, 2, 3).Contiguous() // [C, pixels, N]
	q := p.linear(g, sd3.MidAttention+"to_q.", y)
	k := p.linear(g, sd3.MidAttention+"to_k.", y)
	v := p.linear(g, sd3.MidAttention+"to_v.", y)
	scores := k.MulMat(q).SoftMaxScaled(1 / math.Sqrt(float64(c)))    // [keys, queries, N]
	vt := v.Permute(1, 0, 2, 3).Contiguous()                          // [pixels, C, N]
	o := p.linear(g, sd3.MidAttention+"to_out.0.", vt.MulMat(scores)) // [C, pixels, N]
	o = o.Permute(1, 0, 2, 3).Contiguous().Reshape(w, h, c, n)
	return x.Add(o)
}
