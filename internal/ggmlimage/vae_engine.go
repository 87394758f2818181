package ggmlimage

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"

	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// EngineVAEDecoder is VAEDecoder on llama.cpp's ggml, the text engine's
// build (internal/tensor), instead of ollama's: the first of SD3's parts to
// move there. Same file, same graph, same answers.
type EngineVAEDecoder struct {
	be  *tensor.Backend
	w   *tensor.Weights
	cfg sd3.VAEConfig
	mu  sync.Mutex // a graph at a time: the backend's work buffer is shared
}

// OpenEngineVAEDecoder loads a VAE decoder GGUF written by internal/sd3
// onto the CPU of the engine in LLAMA_LIB_DIR.
func OpenEngineVAEDecoder(path string, threads int, log *slog.Logger) (*EngineVAEDecoder, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	meta, err := fsggml.Decode(f, -1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: not a GGUF file: %w", path, err)
	}
	cfg, err := sd3.VAEConfigOf(meta.KV())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := sd3.CheckShapes(path, meta.Tensors(), cfg.VAEDecoderTensors()); err != nil {
		return nil, err
	}
	be, err := tensor.NewCPU("", threads, log)
	if err != nil {
		return nil, fmt.Errorf("vae decoder: %w", err)
	}
	w, err := be.LoadWeights(path)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("vae decoder: %w", err)
	}
	return &EngineVAEDecoder{be: be, w: w, cfg: cfg}, nil
}

// Config is the decoder's configuration, read from its file.
func (d *EngineVAEDecoder) Config() sd3.VAEConfig { return d.cfg }

// Close frees the weights and the backend; a nil decoder is a no-op.
func (d *EngineVAEDecoder) Close() {
	if d != nil {
		d.w.Close()
		d.be.Close()
	}
}

// Decode turns n latents [n, C, h, w] (already unscaled: x/scaling + shift)
// into n images [n, 3, h·s, w·s], s the decoder's upscale.
func (d *EngineVAEDecoder) Decode(latents []float32, n, h, w int) ([]float32, error) {
	if want := n * d.cfg.LatentChannels * h * w; len(latents) != want {
		return nil, fmt.Errorf("vae decoder: %d latent values for %d×%d×%d×%d", len(latents), n, d.cfg.LatentChannels, h, w)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.be.NewGraph()
	defer g.Close()
	return g.Compute(d.forward(g, g.Input(latents, w, h, d.cfg.LatentChannels, n)))
}

func (d *EngineVAEDecoder) forward(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	cfg := d.cfg
	x = d.conv(g, "decoder.conv_in.", x, 1)
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
			x = d.conv(g, b.Upsample+"conv.", x, 1)
		}
	}
	x = d.groupNorm(g, "decoder.conv_norm_out.", x).SILU()
	return d.conv(g, "decoder.conv_out.", x, 1)
}

// resnet is diffusers' ResnetBlock2D without a time embedding.
func (d *EngineVAEDecoder) resnet(g *tensor.Graph, r sd3.VAEResnet, x tensor.Tensor) tensor.Tensor {
	h := d.groupNorm(g, r.Prefix+"norm1.", x).SILU()
	h = d.conv(g, r.Prefix+"conv1.", h, 1)
	h = d.groupNorm(g, r.Prefix+"norm2.", h).SILU()
	h = d.conv(g, r.Prefix+"conv2.", h, 1)
	if r.In != r.Out {
		x = d.conv(g, r.Prefix+"conv_shortcut.", x, 0)
	}
	return x.Add(h)
}

// attention is the mid block's single-head self-attention over the pixels,
// with a residual connection.
func (d *EngineVAEDecoder) attention(g *tensor.Graph, x tensor.Tensor) tensor.Tensor {
	w, h, c, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	y := d.groupNorm(g, sd3.MidAttention+"group_norm.", x)
	y = y.Reshape(w*h, c, n).Permute(1, 0, 2, 3).Contiguous() // [C, pixels, N]
	q := d.linear(g, sd3.MidAttention+"to_q.", y)
	k := d.linear(g, sd3.MidAttention+"to_k.", y)
	v := d.linear(g, sd3.MidAttention+"to_v.", y)
	scores := k.MulMat(q).Scale(1 / math.Sqrt(float64(c))).SoftMax()  // [keys, queries, N]
	vt := v.Permute(1, 0, 2, 3).Contiguous()                          // [pixels, C, N]
	o := d.linear(g, sd3.MidAttention+"to_out.0.", vt.MulMat(scores)) // [C, pixels, N]
	o = o.Permute(1, 0, 2, 3).Contiguous().Reshape(w, h, c, n)
	return x.Add(o)
}

// conv is a 2-D convolution with bias, stride 1, as torch's Conv2d.
func (d *EngineVAEDecoder) conv(g *tensor.Graph, prefix string, x tensor.Tensor, pad int) tensor.Tensor {
	bias := g.Weight(d.w, prefix+"bias")
	y := g.Weight(d.w, prefix+"weight").Conv2D(x, 1, 1, pad, pad, 1, 1)
	return y.Add(bias.Reshape(1, 1, bias.Dim(0)))
}

// linear is torch's Linear over the first dimension.
func (d *EngineVAEDecoder) linear(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	return g.Weight(d.w, prefix+"weight").MulMat(x).Add(g.Weight(d.w, prefix+"bias"))
}

// groupNorm is torch's GroupNorm on x [W, H, C, N], as part.groupNorm.
func (d *EngineVAEDecoder) groupNorm(g *tensor.Graph, prefix string, x tensor.Tensor) tensor.Tensor {
	w, h, c, n := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	groups := d.cfg.Groups
	y := x.Contiguous().Reshape(w*h*c/groups, groups, n).Norm(sd3.VAENormEps).Reshape(w, h, c, n)
	return y.Mul(g.Weight(d.w, prefix+"weight").Reshape(1, 1, c)).Add(g.Weight(d.w, prefix+"bias").Reshape(1, 1, c))
}
