package sd3

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/x448/float16"

	"github.com/genq/genq/internal/gguf"
)

// GGUF architecture names of the parts, the prefix of their metadata keys.
const (
	ArchVAE   = "sd3_vae"
	ArchMMDiT = "sd3_mmdit"
)

// GGUF metadata keys of the VAE.
const (
	keyLatentChannels = "latent_channels"
	keyBlockOut       = "block_out_channels"
	keyLayersPerBlock = "layers_per_block"
	keyGroups         = "norm_num_groups"
	keyScaling        = "scaling_factor"
	keyShift          = "shift_factor"
)

// VAEMetadata is the decoder's configuration as GGUF keys.
func (c VAEConfig) VAEMetadata() Metadata {
	blocks := make([]uint32, len(c.BlockOut))
	for i, b := range c.BlockOut {
		blocks[i] = uint32(b)
	}
	return Metadata{
		ArchVAE + "." + keyLatentChannels: uint32(c.LatentChannels),
		ArchVAE + "." + keyBlockOut:       blocks,
		ArchVAE + "." + keyLayersPerBlock: uint32(c.LayersPerBlock),
		ArchVAE + "." + keyGroups:         uint32(c.Groups),
		ArchVAE + "." + keyScaling:        float32(c.Scaling),
		ArchVAE + "." + keyShift:          float32(c.Shift),
	}
}

// VAEConfigOf reads the decoder's configuration back from a GGUF header.
func VAEConfigOf(f *gguf.File) (VAEConfig, error) {
	kv, err := metadataOf(f, ArchVAE)
	if err != nil {
		return VAEConfig{}, err
	}
	c := VAEConfig{
		LatentChannels: kv.int(keyLatentChannels),
		LayersPerBlock: kv.int(keyLayersPerBlock),
		Groups:         kv.int(keyGroups),
		Scaling:        kv.float(keyScaling),
		Shift:          kv.float(keyShift),
	}
	if blocks, ok := f.Value(ArchVAE + "." + keyBlockOut).([]uint32); ok {
		for _, b := range blocks {
			c.BlockOut = append(c.BlockOut, int(b))
		}
	}
	return c, c.Check()
}

// Metadata is a part's configuration as GGUF keys and values, of the Go
// types internal/gguf writes.
type Metadata map[string]any

// partMetadata reads one part's keys, each prefixed with its architecture.
// A missing or mistyped key reads as zero, which the configuration's Check
// refuses by name.
type partMetadata struct {
	f    *gguf.File
	arch string
}

func metadataOf(f *gguf.File, arch string) (partMetadata, error) {
	if a, _ := f.Value("general.architecture").(string); a != arch {
		return partMetadata{}, fmt.Errorf("architecture %q, want %q", a, arch)
	}
	return partMetadata{f, arch}, nil
}

func (m partMetadata) int(key string) int {
	v, _ := m.f.Value(m.arch + "." + key).(uint32)
	return int(v)
}

func (m partMetadata) float(key string) float64 {
	v, _ := m.f.Value(m.arch + "." + key).(float32)
	return float64(v)
}

func (m partMetadata) bool(key string) bool {
	v, _ := m.f.Value(m.arch + "." + key).(bool)
	return v
}

// ReadHeader reads the header of the GGUF file at path: its metadata and
// its tensors' descriptions.
func ReadHeader(path string) (*gguf.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, err := gguf.Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: not a GGUF file: %w", path, err)
	}
	return h, nil
}

// DType is how a GGUF file stores the matrices and kernels; vectors (norms,
// biases) and tables that are added (the position table) are always
// float32, as ggml's element-wise kernels want them.
type DType string

const (
	F16 DType = "f16" // what SD3-medium's weights are published in
	F32 DType = "f32" // for comparisons with an fp32 reference
)

// Source gives a part's tensors by name: Weights in memory, or a
// checkpoint read as it is written.
type Source interface {
	Shape(name string) []int // nil when absent
	Values(name string) ([]float32, error)
}

// Shape is a tensor's shape, nil when absent.
func (w Weights) Shape(name string) []int {
	t, ok := w[name]
	if !ok {
		return nil
	}
	return t.Shape
}

// Values are a tensor's values.
func (w Weights) Values(name string) ([]float32, error) {
	t, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	return t.Data, nil
}

// WriteGGUF writes a part's tensors, in the order of specs, with its
// metadata. Each tensor is read from w as it is written, so a checkpoint
// larger than memory converts. The file appears whole or not at all.
func WriteGGUF(path, arch string, meta Metadata, specs []Spec, w Source, dtype DType) error {
	if dtype != F16 && dtype != F32 {
		return fmt.Errorf("gguf %s: dtype %q, want f16 or f32", path, dtype)
	}
	kv := []gguf.KV{{Key: "general.architecture", Value: arch}, {Key: "general.name", Value: "genq " + arch}}
	fileType := uint32(0) // llama.cpp's LLAMA_FTYPE_ALL_F32
	if dtype == F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	kv = append(kv, gguf.KV{Key: "general.file_type", Value: fileType})
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		kv = append(kv, gguf.KV{Key: k, Value: meta[k]})
	}

	var ts []gguf.Tensor
	for _, s := range specs {
		shape := w.Shape(s.Name)
		if shape == nil {
			return fmt.Errorf("gguf %s: tensor %s is missing", path, s.Name)
		}
		if !slices.Equal(shape, s.Shape) {
			return fmt.Errorf("gguf %s: tensor %s has shape %v, want %v", path, s.Name, shape, s.Shape)
		}
		kind := gguf.TensorF32
		if dtype == F16 && len(s.Shape) > 1 && strings.HasSuffix(s.Name, ".weight") {
			kind = gguf.TensorF16
		}
		ts = append(ts, gguf.Tensor{Name: s.Name, Type: kind, Shape: GGMLShape(s.Shape), Data: encoded{w, s.Name, kind}})
	}
	return gguf.WriteFile(path, kv, ts)
}

// GGMLShape is a PyTorch shape in ggml's order, innermost first: the bytes
// are the same, only the dimensions are listed the other way round.
func GGMLShape(shape []int) []uint64 {
	out := make([]uint64, len(shape))
	for i, d := range shape {
		out[len(shape)-1-i] = uint64(d)
	}
	return out
}

// encoded writes a tensor's values as float32 or float16.
type encoded struct {
	src  Source
	name string
	kind gguf.TensorType
}

func (e encoded) WriteTo(w io.Writer) (int64, error) {
	data, err := e.src.Values(e.name)
	if err != nil {
		return 0, err
	}
	out := make([]byte, 0, 4*len(data))
	for _, v := range data {
		if e.kind == gguf.TensorF16 {
			out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
		} else {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	n, err := w.Write(out)
	return int64(n), err
}

// CheckShapes compares a GGUF file's tensors with the specs a part needs:
// the first missing or misshapen one is named, in one line.
func CheckShapes(path string, ts []gguf.TensorInfo, specs []Spec) error {
	have := map[string]gguf.TensorInfo{}
	for _, t := range ts {
		have[t.Name] = t
	}
	for _, s := range specs {
		t, ok := have[s.Name]
		if !ok {
			return fmt.Errorf("%s: tensor %s is missing", path, s.Name)
		}
		if want := GGMLShape(s.Shape); !slices.Equal(t.Shape, want) {
			return fmt.Errorf("%s: tensor %s has shape %v, want %v (PyTorch order)", path, s.Name, reversed(t.Shape), s.Shape)
		}
	}
	return nil
}

func reversed(s []uint64) []uint64 {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// Where the ggml engine's files lie in a model directory, beside the ONNX
// export's parts.
const (
	VAEDecoderFile  = "ggml/vae_decoder.gguf"
	TransformerFile = "ggml/transformer.gguf"
	ClipLFile       = "ggml/text_encoder.gguf"
	ClipGFile       = "ggml/text_encoder_2.gguf"
	T5File          = "ggml/text_encoder_3.gguf"
)

// MMDiTMetadata is the transformer's configuration as GGUF keys.
func (c MMDiTConfig) MMDiTMetadata() Metadata {
	kv := Metadata{}
	for key, v := range c.fields() {
		kv[ArchMMDiT+"."+key] = uint32(*v)
	}
	return kv
}

// MMDiTConfigOf reads the transformer's configuration back from GGUF
// metadata.
func MMDiTConfigOf(f *gguf.File) (MMDiTConfig, error) {
	kv, err := metadataOf(f, ArchMMDiT)
	if err != nil {
		return MMDiTConfig{}, err
	}
	var c MMDiTConfig
	for key, v := range c.fields() {
		*v = kv.int(key)
	}
	return c, c.Check()
}

// fields names the configuration's GGUF keys, diffusers' config names.
func (c *MMDiTConfig) fields() map[string]*int {
	return map[string]*int{
		"patch_size": &c.PatchSize, "in_channels": &c.InChannels, "out_channels": &c.OutChannels,
		"num_layers": &c.Layers, "num_attention_heads": &c.Heads, "attention_head_dim": &c.HeadDim,
		"joint_attention_dim": &c.JointDim, "pooled_projection_dim": &c.PooledDim,
		"sample_size": &c.SampleSize, "pos_embed_max_size": &c.PosEmbedMax,
	}
}

// ArchCLIP is the GGUF architecture of both CLIP text encoders.
const ArchCLIP = "sd3_clip"

// CLIPMetadata is the encoder's configuration as GGUF keys.
func (c CLIPConfig) CLIPMetadata() Metadata {
	kv := Metadata{ArchCLIP + ".quick_gelu": c.QuickGELU}
	for key, v := range c.fields() {
		kv[ArchCLIP+"."+key] = uint32(*v)
	}
	return kv
}

// CLIPConfigOf reads a CLIP encoder's configuration from GGUF metadata.
func CLIPConfigOf(f *gguf.File) (CLIPConfig, error) {
	kv, err := metadataOf(f, ArchCLIP)
	if err != nil {
		return CLIPConfig{}, err
	}
	c := CLIPConfig{QuickGELU: kv.bool("quick_gelu")}
	for key, v := range c.fields() {
		*v = kv.int(key)
	}
	return c, c.Check()
}

func (c *CLIPConfig) fields() map[string]*int {
	return map[string]*int{
		"vocab_size": &c.Vocab, "max_position_embeddings": &c.Positions, "hidden_size": &c.Width,
		"num_hidden_layers": &c.Layers, "num_attention_heads": &c.Heads, "intermediate_size": &c.FFN,
		"projection_dim": &c.Projection,
	}
}

// ArchT5 is the GGUF architecture of the T5 encoder.
const ArchT5 = "sd3_t5"

// T5Metadata is the encoder's configuration as GGUF keys.
func (c T5Config) T5Metadata() Metadata {
	kv := Metadata{}
	for key, v := range c.fields() {
		kv[ArchT5+"."+key] = uint32(*v)
	}
	return kv
}

// T5ConfigOf reads the encoder's configuration from GGUF metadata.
func T5ConfigOf(f *gguf.File) (T5Config, error) {
	kv, err := metadataOf(f, ArchT5)
	if err != nil {
		return T5Config{}, err
	}
	var c T5Config
	for key, v := range c.fields() {
		*v = kv.int(key)
	}
	return c, c.Check()
}

func (c *T5Config) fields() map[string]*int {
	return map[string]*int{
		"vocab_size": &c.Vocab, "d_model": &c.Width, "num_layers": &c.Layers, "num_heads": &c.Heads,
		"d_kv": &c.HeadDim, "d_ff": &c.FFN, "relative_attention_num_buckets": &c.Buckets,
		"relative_attention_max_distance": &c.MaxDistance,
	}
}
