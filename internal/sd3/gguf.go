package sd3

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/x448/float16"
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
func (c VAEConfig) VAEMetadata() fsggml.KV {
	blocks := make([]uint32, len(c.BlockOut))
	for i, b := range c.BlockOut {
		blocks[i] = uint32(b)
	}
	return fsggml.KV{
		ArchVAE + "." + keyLatentChannels: uint32(c.LatentChannels),
		ArchVAE + "." + keyBlockOut:       blocks,
		ArchVAE + "." + keyLayersPerBlock: uint32(c.LayersPerBlock),
		ArchVAE + "." + keyGroups:         uint32(c.Groups),
		ArchVAE + "." + keyScaling:        float32(c.Scaling),
		ArchVAE + "." + keyShift:          float32(c.Shift),
	}
}

// VAEConfigOf reads the decoder's configuration back from GGUF metadata.
func VAEConfigOf(kv fsggml.KV) (VAEConfig, error) {
	if a := kv.Architecture(); a != ArchVAE {
		return VAEConfig{}, fmt.Errorf("architecture %q, want %q", a, ArchVAE)
	}
	c := VAEConfig{
		LatentChannels: int(kv.Uint(keyLatentChannels)),
		LayersPerBlock: int(kv.Uint(keyLayersPerBlock)),
		Groups:         int(kv.Uint(keyGroups)),
		Scaling:        float64(kv.Float(keyScaling)),
		Shift:          float64(kv.Float(keyShift)),
	}
	for _, b := range kv.Uints(keyBlockOut) {
		c.BlockOut = append(c.BlockOut, int(b))
	}
	return c, c.Check()
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
func WriteGGUF(path, arch string, meta fsggml.KV, specs []Spec, w Source, dtype DType) error {
	if dtype != F16 && dtype != F32 {
		return fmt.Errorf("gguf %s: dtype %q, want f16 or f32", path, dtype)
	}
	kv := fsggml.KV{"general.architecture": arch, "general.name": "genq " + arch}
	for k, v := range meta {
		kv[k] = v
	}
	// The engine places each tensor by the first number in its name, one
	// "block" per number: there must be as many blocks as that number runs to.
	kv[arch+".block_count"] = uint32(BlockCount(specs))
	fileType := uint32(fsggml.FileTypeF32)
	if dtype == F16 {
		fileType = uint32(fsggml.FileTypeF16)
	}
	kv["general.file_type"] = fileType

	var ts []*fsggml.Tensor
	for _, s := range specs {
		shape := w.Shape(s.Name)
		if shape == nil {
			return fmt.Errorf("gguf %s: tensor %s is missing", path, s.Name)
		}
		if !slices.Equal(shape, s.Shape) {
			return fmt.Errorf("gguf %s: tensor %s has shape %v, want %v", path, s.Name, shape, s.Shape)
		}
		kind := fsggml.TensorTypeF32
		if dtype == F16 && len(s.Shape) > 1 && strings.HasSuffix(s.Name, ".weight") {
			kind = fsggml.TensorTypeF16
		}
		ts = append(ts, &fsggml.Tensor{Name: s.Name, Kind: uint32(kind), Shape: GGMLShape(s.Shape), WriterTo: encoded{w, s.Name, kind}})
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".part-*.gguf")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf: %w", err)
	}
	if err := fsggml.WriteGGUF(tmp, kv, ts); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
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

// BlockCount is one more than the largest first number in the names.
func BlockCount(specs []Spec) int {
	n := 0
	for _, s := range specs {
		fields := strings.FieldsFunc(s.Name, func(r rune) bool { return !unicode.IsDigit(r) })
		if len(fields) > 0 {
			if i, err := strconv.Atoi(fields[0]); err == nil {
				n = max(n, i+1)
			}
		}
	}
	return n
}

// encoded writes a tensor's values as float32 or float16.
type encoded struct {
	src  Source
	name string
	kind fsggml.TensorType
}

func (e encoded) WriteTo(w io.Writer) (int64, error) {
	data, err := e.src.Values(e.name)
	if err != nil {
		return 0, err
	}
	out := make([]byte, 0, 4*len(data))
	for _, v := range data {
		if e.kind == fsggml.TensorTypeF16 {
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
func CheckShapes(path string, ts fsggml.Tensors, specs []Spec) error {
	have := map[string]*fsggml.Tensor{}
	for _, t := range ts.Items() {
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
func (c MMDiTConfig) MMDiTMetadata() fsggml.KV {
	kv := fsggml.KV{}
	for key, v := range c.fields() {
		kv[ArchMMDiT+"."+key] = uint32(*v)
	}
	return kv
}

// MMDiTConfigOf reads the transformer's configuration back from GGUF
// metadata.
func MMDiTConfigOf(kv fsggml.KV) (MMDiTConfig, error) {
	if a := kv.Architecture(); a != ArchMMDiT {
		return MMDiTConfig{}, fmt.Errorf("architecture %q, want %q", a, ArchMMDiT)
	}
	var c MMDiTConfig
	for key, v := range c.fields() {
		*v = int(kv.Uint(key))
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
func (c CLIPConfig) CLIPMetadata() fsggml.KV {
	kv := fsggml.KV{ArchCLIP + ".quick_gelu": c.QuickGELU}
	for key, v := range c.fields() {
		kv[ArchCLIP+"."+key] = uint32(*v)
	}
	return kv
}

// CLIPConfigOf reads a CLIP encoder's configuration from GGUF metadata.
func CLIPConfigOf(kv fsggml.KV) (CLIPConfig, error) {
	if a := kv.Architecture(); a != ArchCLIP {
		return CLIPConfig{}, fmt.Errorf("architecture %q, want %q", a, ArchCLIP)
	}
	c := CLIPConfig{QuickGELU: kv.Bool("quick_gelu")}
	for key, v := range c.fields() {
		*v = int(kv.Uint(key))
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
func (c T5Config) T5Metadata() fsggml.KV {
	kv := fsggml.KV{}
	for key, v := range c.fields() {
		kv[ArchT5+"."+key] = uint32(*v)
	}
	return kv
}

// T5ConfigOf reads the encoder's configuration from GGUF metadata.
func T5ConfigOf(kv fsggml.KV) (T5Config, error) {
	if a := kv.Architecture(); a != ArchT5 {
		return T5Config{}, fmt.Errorf("architecture %q, want %q", a, ArchT5)
	}
	var c T5Config
	for key, v := range c.fields() {
		*v = int(kv.Uint(key))
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
