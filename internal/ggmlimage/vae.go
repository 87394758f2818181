package ggmlimage

import (
	"context"
	"fmt"
	"math"

	"github.com/ollama/ollama/ml"

	"github.com/genq/genq/internal/sd3"
)

// VAEDecoder is SD3's AutoencoderKL decoder: latents to pixels in [-1, 1]
// (before clamping), as diffusers' vae.decode.
type VAEDecoder struct {
	part *part
	cfg  sd3.VAEConfig
}

// OpenVAEDecoder loads a VAE decoder GGUF written by internal/sd3.
func OpenVAEDecoder(ctx context.Context, path string, threads int) (*VAEDecoder, error) {
	return openVAEDecoder(ctx, path, loadOptions{threads: threads})
}

func openVAEDecoder(ctx context.Context, path string, opts loadOptions) (*VAEDecoder, error) {
	p, cfg, err := openPart(ctx, path, opts, sd3.VAEConfigOf, sd3.VAEConfig.VAEDecoderTensors)
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
func (d *VAEDecoder) Decode(latents []float32, n, h, w int) (pixels []float32, err error) {
	if want := n * d.cfg.LatentChannels * h * w; len(latents) != want {
		return nil, fmt.Errorf("vae decoder: %d latent values for %d×%d×%d×%d", len(latents), n, d.cfg.LatentChannels, h, w)
	}
	d.part.mu.Lock()
	defer d.part.mu.Unlock()
	defer recoverError(&err)
	ctx := d.part.backend.NewContext()
	defer ctx.Close()
	x := ctx.Input().FromFloats(latents, w, h, d.cfg.LatentChannels, n)
	out := d.forward(ctx, x)
	ctx.Forward(out).Compute(out)
	return out.Floats(), nil
}

func (d *VAEDecoder) forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	p, cfg := d.part, d.cfg
	x = p.conv(ctx, "decoder.conv_in.", x, 1)
	mid := cfg.MidResnets()
	x = d.resnet(ctx, mid[0], x)
	x = d.attention(ctx, x)
	x = d.resnet(ctx, mid[1], x)
	for _, b := range cfg.UpBlocks() {
		for _, r := range b.Resnets {
			x = d.resnet(ctx, r, x)
		}
		if b.Upsample != "" {
			x = x.Interpolate(ctx, [4]int{2 * x.Dim(0), 2 * x.Dim(1), x.Dim(2), x.Dim(3)}, ml.SamplingModeNearest)
			x = p.conv(ctx, b.Upsample+"conv.", x, 1)
		}
	}
	x = p.groupNorm(ctx, "decoder.conv_norm_out.", x, cfg.Groups, sd3.VAENormEps).SILU(ctx)
	return p.conv(ctx, "decoder.conv_out.", x, 1)
}

// resnet is diffusers' ResnetBlock2D without a time embedding.
func (d *VAEDecoder) resnet(ctx ml.Context, r sd3.VAEResnet, x ml.Tensor) ml.Tensor {
	p, g := d.part, d.cfg.Groups
	h := p.groupNorm(ctx, r.Prefix+"norm1.", x, g, sd3.VAENormEps).SILU(ctx)
	h = p.conv(ctx, r.Prefix+"conv1.", h, 1)
	h = p.groupNorm(ctx, r.Prefix+"norm2.", h, g, sd3.VAENormEps).SILU(ctx)
	h = p.conv(ctx, r.Prefix+"conv2.", h, 1)
	if r.In != r.Out {
		x = p.conv(ctx, r.Prefix+"conv_shortcut.", x, 0)
	}
	return x.Add(ctx, h)
}

// attention is the mid block's single-head self-attention over the pixels,
// with a residual connection.
func (d *VAEDecoder) attention(ctx ml.Context, x ml.Tensor) ml.Tensor {
	p := d.part
	w, h, c, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	y := p.groupNorm(ctx, sd3.MidAttention+"group_norm.", x, d.cfg.Groups, sd3.VAENormEps)
	y = y.Reshape(ctx, w*h, c, n).Permute(ctx, 1, 0, 2, 3).Contiguous(ctx) // [C, pixels, N]
	q := p.linear(ctx, sd3.MidAttention+"to_q.", y)
	k := p.linear(ctx, sd3.MidAttention+"to_k.", y)
	v := p.linear(ctx, sd3.MidAttention+"to_v.", y)
	scores := k.Mulmat(ctx, q).Scale(ctx, 1/math.Sqrt(float64(c))).Softmax(ctx) // [keys, queries, N]
	vt := v.Permute(ctx, 1, 0, 2, 3).Contiguous(ctx)                            // [pixels, C, N]
	o := p.linear(ctx, sd3.MidAttention+"to_out.0.", vt.Mulmat(ctx, scores))    // [C, pixels, N]
	o = o.Permute(ctx, 1, 0, 2, 3).Contiguous(ctx).Reshape(ctx, w, h, c, n)
	return x.Add(ctx, o)
}
