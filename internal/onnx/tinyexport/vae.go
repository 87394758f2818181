package tinyexport

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/genq/genq/internal/onnx/half"
	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/sd3"
)

// sd3VAEDecoderModel is SD3's AutoencoderKL decoder in its real
// architecture (ResNet blocks, group norm, a mid attention, nearest
// upsampling), its weights from w under diffusers' names, written as
// torch's ONNX export writes it for opsets before GroupNormalization:
// a group norm is an InstanceNormalization over [N, groups, rest].
func sd3VAEDecoderModel(b *graph, cfg sd3.VAEConfig, w sd3.Weights) []byte {
	b.input("latent_sample", b.io.float, param("batch_size"), fixed(int64(cfg.LatentChannels)), param("latent_height"), param("latent_width"))
	v := vaeGraph{weighted{b, w}, cfg}
	x := v.conv("decoder.conv_in.", b.toFloat("latent_sample"), 1)
	mid := cfg.MidResnets()
	x = v.resnet(mid[0], x)
	x = v.attention(x)
	x = v.resnet(mid[1], x)
	for _, blk := range cfg.UpBlocks() {
		for _, r := range blk.Resnets {
			x = v.resnet(r, x)
		}
		if blk.Upsample != "" {
			x = b.op("Resize", []string{x, b.floats([]int64{0}), b.floats([]int64{4}, 1, 1, 2, 2)},
				onnxproto.StringAttr("mode", "nearest"), onnxproto.StringAttr("coordinate_transformation_mode", "asymmetric"),
				onnxproto.StringAttr("nearest_mode", "floor"))
			x = v.conv(blk.Upsample+"conv.", x, 1)
		}
	}
	x = v.silu(v.groupNorm("decoder.conv_norm_out.", x))
	x = v.conv("decoder.conv_out.", x, 1)
	b.output("sample", x, param("batch_size"), fixed(3), param("height"), param("width"))
	return b.model()
}

// weighted is a graph whose weights come from a part's sd3.Weights.
type weighted struct {
	*graph
	w sd3.Weights
}

type vaeGraph struct {
	weighted
	cfg sd3.VAEConfig
}

// tensor adds w[name] as an fp16 initializer of the given dims (its own
// shape when none) and returns its fp32 cast.
func (v weighted) tensor(name string, dims ...int64) string {
	t := v.w[name]
	if len(dims) == 0 {
		for _, d := range t.Shape {
			dims = append(dims, int64(d))
		}
	}
	v.g.Initializers = append(v.g.Initializers, onnxproto.Tensor{Name: name, Type: onnxproto.Float16, Dims: dims, Raw: half.Encode(t.Data)})
	return v.toFloat(name)
}

func (v weighted) conv(prefix, x string, pad int64) string {
	k := int64(v.w[prefix+"weight"].Shape[2])
	return v.op("Conv", []string{x, v.tensor(prefix + "weight"), v.tensor(prefix + "bias")},
		onnxproto.IntsAttr("kernel_shape", k, k), onnxproto.IntsAttr("pads", pad, pad, pad, pad))
}

// linear is x·Wᵀ + b over the last axis.
func (v weighted) linear(prefix, x string) string {
	wt := v.op("Transpose", []string{v.tensor(prefix + "weight")}, onnxproto.IntsAttr("perm", 1, 0))
	return v.op("Add", []string{v.op("MatMul", []string{x, wt}), v.tensor(prefix + "bias")})
}

func (v vaeGraph) groupNorm(prefix, x string) string {
	g := int64(v.cfg.Groups)
	ones, zeros := make([]float32, g), make([]float32, g)
	for i := range ones {
		ones[i] = 1
	}
	grouped := v.op("Reshape", []string{x, v.ints(0, g, -1)})
	norm := v.op("InstanceNormalization", []string{grouped, v.floatData([]int64{g}, ones), v.floatData([]int64{g}, zeros)},
		onnxproto.FloatAttr("epsilon", sd3.VAENormEps))
	y := v.op("Reshape", []string{norm, v.op("Shape", []string{x})})
	c := int64(v.w[prefix+"weight"].Shape[0])
	y = v.op("Mul", []string{y, v.tensor(prefix+"weight", c, 1, 1)})
	return v.op("Add", []string{y, v.tensor(prefix+"bias", c, 1, 1)})
}

func (v weighted) silu(x string) string {
	return v.op("Mul", []string{x, v.op("Sigmoid", []string{x})})
}

func (v vaeGraph) resnet(r sd3.VAEResnet, x string) string {
	h := v.conv(r.Prefix+"conv1.", v.silu(v.groupNorm(r.Prefix+"norm1.", x)), 1)
	h = v.conv(r.Prefix+"conv2.", v.silu(v.groupNorm(r.Prefix+"norm2.", h)), 1)
	if r.In != r.Out {
		x = v.conv(r.Prefix+"conv_shortcut.", x, 0)
	}
	return v.op("Add", []string{x, h})
}

// attention is diffusers' single-head Attention over the pixels, with its
// residual.
func (v vaeGraph) attention(x string) string {
	p := sd3.MidAttention
	c := int64(v.w[p+"to_q.weight"].Shape[0])
	y := v.groupNorm(p+"group_norm.", x)
	y = v.op("Transpose", []string{v.op("Reshape", []string{y, v.ints(0, c, -1)})}, onnxproto.IntsAttr("perm", 0, 2, 1)) // [N, pixels, C]
	q, k, val := v.linear(p+"to_q.", y), v.linear(p+"to_k.", y), v.linear(p+"to_v.", y)
	scores := v.op("MatMul", []string{q, v.op("Transpose", []string{k}, onnxproto.IntsAttr("perm", 0, 2, 1))})
	scores = v.op("Mul", []string{scores, v.floats(nil, float32(1/math.Sqrt(float64(c))))})
	o := v.op("MatMul", []string{v.op("Softmax", []string{scores}, onnxproto.IntAttr("axis", -1)), val})
	o = v.op("Transpose", []string{v.linear(p+"to_out.0.", o)}, onnxproto.IntsAttr("perm", 0, 2, 1))
	return v.op("Add", []string{x, v.op("Reshape", []string{o, v.op("Shape", []string{x})})})
}

// floats adds an fp32 constant of the given dims (nil: a scalar).
func (b *graph) floats(dims []int64, vals ...float32) string {
	return b.floatData(dims, vals)
}

func (b *graph) floatData(dims []int64, vals []float32) string {
	b.n++
	name := fmt.Sprintf("const_%d", b.n)
	raw := make([]byte, 0, 4*len(vals))
	for _, f := range vals {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
	}
	b.g.Initializers = append(b.g.Initializers, onnxproto.Tensor{Name: name, Type: onnxproto.Float, Dims: dims, Raw: raw})
	return name
}
