package sd3

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"
)

func TestVAEDecoderTensors(t *testing.T) {
	specs := MediumVAE().VAEDecoderTensors()
	byName := map[string][]int{}
	params := 0
	for _, s := range specs {
		if _, dup := byName[s.Name]; dup {
			t.Fatalf("%s listed twice", s.Name)
		}
		byName[s.Name] = s.Shape
		params += s.Elements()
	}
	// Names and shapes of diffusers' SD3 VAE decoder.
	for name, shape := range map[string][]int{
		"decoder.conv_in.weight":                             {512, 16, 3, 3},
		"decoder.mid_block.attentions.0.to_q.weight":         {512, 512},
		"decoder.mid_block.attentions.0.to_out.0.bias":       {512},
		"decoder.up_blocks.0.upsamplers.0.conv.weight":       {512, 512, 3, 3},
		"decoder.up_blocks.2.resnets.0.conv_shortcut.weight": {256, 512, 1, 1},
		"decoder.up_blocks.3.resnets.2.conv2.weight":         {128, 128, 3, 3},
		"decoder.conv_norm_out.weight":                       {128},
		"decoder.conv_out.weight":                            {3, 128, 3, 3},
	} {
		if got, ok := byName[name]; !ok || !slices.Equal(got, shape) {
			t.Errorf("%s: shape %v (listed %v), want %v", name, got, ok, shape)
		}
	}
	if _, ok := byName["decoder.up_blocks.3.upsamplers.0.conv.weight"]; ok {
		t.Error("the last up block has an upsampler")
	}
	// SD3's VAE decoder has 49.5M parameters.
	if params < 49_000_000 || params > 50_000_000 {
		t.Errorf("%d parameters, want about 49.5M", params)
	}
}

func TestGGUFRoundTrip(t *testing.T) {
	for _, dtype := range []DType{F32, F16} {
		t.Run(string(dtype), func(t *testing.T) {
			cfg := TinyVAE()
			specs := cfg.VAEDecoderTensors()
			w := RandomWeights(specs, 7)
			path := filepath.Join(t.TempDir(), "vae.gguf")
			if err := WriteGGUF(path, ArchVAE, cfg.VAEMetadata(), specs, w, dtype); err != nil {
				t.Fatal(err)
			}
			meta, err := ReadHeader(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := VAEConfigOf(meta)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.BlockOut, cfg.BlockOut) || got.Groups != cfg.Groups || got.LatentChannels != cfg.LatentChannels ||
				got.LayersPerBlock != cfg.LayersPerBlock || float32(got.Scaling) != float32(cfg.Scaling) {
				t.Errorf("config %+v, want %+v", got, cfg)
			}
			if err := CheckShapes(path, meta.Tensors, specs); err != nil {
				t.Fatal(err)
			}

			// A wrong shape is named in one line.
			bad := slices.Clone(specs)
			bad[0] = Spec{bad[0].Name, []int{1, 2, 3, 3}}
			err = CheckShapes(path, meta.Tensors, bad)
			if err == nil || !strings.Contains(err.Error(), "decoder.conv_in.weight") || strings.Contains(err.Error(), "\n") {
				t.Errorf("wrong shape: %v", err)
			}
		})
	}
}

func TestRandomWeightsAreFixedAndHalfExact(t *testing.T) {
	specs := TinyVAE().VAEDecoderTensors()
	a, b := RandomWeights(specs, 1), RandomWeights(specs, 1)
	c := RandomWeights(specs, 2)
	name := "decoder.conv_in.weight"
	if !slices.Equal(a[name].Data, b[name].Data) {
		t.Error("the same seed gave different weights")
	}
	if slices.Equal(a[name].Data, c[name].Data) {
		t.Error("another seed gave the same weights")
	}
	for _, v := range a[name].Data {
		if float16.Fromfloat32(v).Float32() != v {
			t.Fatalf("weight %v is not a float16 value", v)
		}
	}
	if norm := a["decoder.conv_norm_out.weight"].Data; norm[0] < 0.5 || norm[0] > 1.5 {
		t.Errorf("a norm's scale is %v, want near 1", norm[0])
	}
}

// Buckets of transformers' _relative_position_bucket for an encoder with
// 32 buckets and a maximum distance of 128, worked by hand from its code.
func TestT5Buckets(t *testing.T) {
	c := T5XXL()
	const seq = 300
	b := c.T5Buckets(seq)
	at := func(q, k int) int32 { return b[q*seq+k] }
	for _, tc := range []struct{ rel, bucket int }{
		{0, 0}, {-1, 1}, {1, 17}, {-7, 7}, {7, 23}, {-8, 8}, {-9, 8}, {-12, 9}, {-20, 10}, {-127, 15}, {-128, 15}, {-250, 15}, {128, 31}, {250, 31},
	} {
		q := 260
		if tc.rel > 0 {
			q = 0
		}
		if got := at(q, q+tc.rel); got != int32(tc.bucket) {
			t.Errorf("relative position %d: bucket %d, want %d", tc.rel, got, tc.bucket)
		}
	}
}

// RandomSource draws, tensor by tensor, what RandomWeights draws at once.
func TestRandomSourceIsRandomWeights(t *testing.T) {
	c := TinyMMDiT()
	w, src := c.RandomMMDiTWeights(4), c.RandomMMDiTSource(4)
	for _, s := range c.MMDiTTensors() {
		got, err := src.Values(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, w[s.Name].Data) || !slices.Equal(src.Shape(s.Name), s.Shape) {
			t.Fatalf("%s differs", s.Name)
		}
	}
	if _, err := src.Values("nope"); err == nil || src.Shape("nope") != nil {
		t.Error("an unknown tensor was found")
	}
}

// SD3-medium's parts fit together as the ggml engine checks them, and
// have the parameter counts of the published model.
func TestMediumShapes(t *testing.T) {
	m, l, g, t5, v := MediumMMDiT(), ClipL(), ClipG(), T5XXL(), MediumVAE()
	if l.Width+g.Width > m.JointDim || l.Projection+g.Projection != m.PooledDim || t5.Width != m.JointDim || v.LatentChannels != m.InChannels {
		t.Error("the medium parts do not fit together")
	}
	count := func(specs []Spec) int {
		n := 0
		for _, s := range specs {
			n += s.Elements()
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		n        int
		min, max int
	}{
		{"transformer", count(m.MMDiTTensors()), 2_000_000_000, 2_100_000_000},
		{"clip-l", count(l.CLIPTensors()), 123_000_000, 124_000_000},
		{"clip-g", count(g.CLIPTensors()), 694_000_000, 695_000_000},
		{"t5", count(t5.T5Tensors()), 4_700_000_000, 4_800_000_000},
	} {
		if tc.n < tc.min || tc.n > tc.max {
			t.Errorf("%s: %d parameters, want %d to %d", tc.name, tc.n, tc.min, tc.max)
		}
	}
}
