// Package diffusion holds the steps of a diffusion pipeline that need no
// engine: the starting noise, the denoising loop with classifier-free
// guidance, the VAE's latent scaling and the PNG or JPEG of the decoded
// pixels. Both image engines (ONNX Runtime in internal/onnx, ggml in
// internal/ggmlimage) run them, so the same job gives the same numbers
// around their models.
package diffusion

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"

	"github.com/genq/genq/internal/genq"
)

// Guidance writes classifier-free guidance into out:
// v = u + scale·(c − u). uncond and cond are the two halves of the batch.
func Guidance(out, uncond, cond []float32, scale float64) {
	s := float32(scale)
	for i := range out {
		out[i] = uncond[i] + s*(cond[i]-uncond[i])
	}
}

// Unscale maps denoised latents to the VAE decoder's input:
// x/scaling + shift (SD3: 1.5305 and 0.0609).
func Unscale(latents []float32, scaling, shift float64) []float32 {
	out := make([]float32, len(latents))
	for i, x := range latents {
		out[i] = float32(float64(x)/scaling + shift)
	}
	return out
}

// toPixel maps a decoder output value in [-1, 1] to a byte: (v/2 + 0.5)
// clamped to [0, 1], times 255, rounded half away from zero as numpy does.
func toPixel(v float32) uint8 {
	x := float64(v)/2 + 0.5
	x = max(0, min(1, x))
	return uint8(math.Round(x * 255))
}

// EncodePNG writes the first image of a decoder output [N,3,H,W] as an
// opaque RGB PNG.
func EncodePNG(sample []float32, shape []int64) ([]byte, error) {
	img, err := Pixels(sample, shape)
	if err != nil {
		return nil, err
	}
	data, _, err := Encode(img, genq.ImagePNG, 0)
	return data, err
}

// Pixels is the first image of a decoder output [N,3,H,W], opaque.
func Pixels(sample []float32, shape []int64) (*image.NRGBA, error) {
	if len(shape) != 4 || shape[1] != 3 {
		return nil, fmt.Errorf("vae output has shape %v, want [N,3,H,W]", shape)
	}
	h, w := int(shape[2]), int(shape[3])
	if len(sample) < 3*h*w {
		return nil, fmt.Errorf("vae output has %d values, want at least %d", len(sample), 3*h*w)
	}
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	plane := h * w
	for y := range h {
		for x := range w {
			i := y*w + x
			o := img.PixOffset(x, y)
			img.Pix[o+0] = toPixel(sample[i])
			img.Pix[o+1] = toPixel(sample[plane+i])
			img.Pix[o+2] = toPixel(sample[2*plane+i])
			img.Pix[o+3] = 255
		}
	}
	return img, nil
}

// Encode writes img in format (genq.ImagePNG, the default, or
// genq.ImageJPEG at quality, 0 for genq.DefaultJPEGQuality) and returns its
// bytes and content type.
func Encode(img image.Image, format string, quality int) ([]byte, string, error) {
	var buf bytes.Buffer
	switch format {
	case genq.ImageJPEG:
		if quality == 0 {
			quality = genq.DefaultJPEGQuality
		}
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
			return nil, "", fmt.Errorf("jpeg: %w", err)
		}
		return buf.Bytes(), "image/jpeg", nil
	default:
		var err error
		if nrgba, ok := img.(*image.NRGBA); ok {
			err = encodePNG(&buf, nrgba)
		} else {
			err = png.Encode(&buf, img)
		}
		if err != nil {
			return nil, "", fmt.Errorf("png: %w", err)
		}
		return buf.Bytes(), "image/png", nil
	}
}

// InitialLatents draws unit normal noise from seed.
func InitialLatents(seed int64, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32^0x5d3))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}
