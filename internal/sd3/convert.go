package sd3

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ConvertDiffusers writes the ggml engine's GGUF files (VAEDecoderFile and
// its neighbours) from a diffusers-layout SD3 checkpoint in dir: each
// part's config.json and safetensors, the names diffusers and transformers
// save. Matrices and kernels are stored as dtype (F16 keeps SD3-medium's
// published precision). A missing or misshapen tensor stops it, named.
// With withT5 false, T5 is not converted (IMAGE_T5=off needs none).
func ConvertDiffusers(dir string, dtype DType, withT5 bool, progress func(part string)) error {
	type job struct {
		part, file, arch string
		convert          func(string) (Metadata, []Spec, func(string) string, error)
	}
	jobs := []job{
		{"vae", VAEDecoderFile, ArchVAE, vaePart},
		{"transformer", TransformerFile, ArchMMDiT, mmditPart},
		{"text_encoder", ClipLFile, ArchCLIP, clipPart},
		{"text_encoder_2", ClipGFile, ArchCLIP, clipPart},
	}
	if withT5 {
		jobs = append(jobs, job{"text_encoder_3", T5File, ArchT5, t5Part})
	}
	for _, j := range jobs {
		if progress != nil {
			progress(j.part)
		}
		partDir := filepath.Join(dir, j.part)
		meta, specs, sourceName, err := j.convert(filepath.Join(partDir, "config.json"))
		if err != nil {
			return fmt.Errorf("convert %s: %w", j.part, err)
		}
		st, err := OpenSafetensors(partDir)
		if err != nil {
			return fmt.Errorf("convert %s: %w", j.part, err)
		}
		err = WriteGGUF(filepath.Join(dir, j.file), j.arch, meta, specs, renamed{st, sourceName}, dtype)
		st.Close()
		if err != nil {
			return fmt.Errorf("convert %s: %w", j.part, err)
		}
	}
	return nil
}

// renamed reads GGUF names from a checkpoint that names them otherwise.
type renamed struct {
	st   *Safetensors
	name func(string) string
}

func (r renamed) Shape(name string) []int { return r.st.Shape(r.source(name)) }
func (r renamed) Values(name string) ([]float32, error) {
	return r.st.Values(r.source(name))
}

// source is name in the checkpoint; T5's embedding may be saved only as
// encoder.embed_tokens.weight, to which shared.weight is tied.
func (r renamed) source(name string) string {
	n := r.name(name)
	if n == "shared.weight" && !r.st.Has(n) {
		return "encoder.embed_tokens.weight"
	}
	return n
}

func same(name string) string { return name }

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func vaePart(path string) (Metadata, []Spec, func(string) string, error) {
	var c struct {
		Latent    int      `json:"latent_channels"`
		Blocks    []int    `json:"block_out_channels"`
		Layers    int      `json:"layers_per_block"`
		Groups    int      `json:"norm_num_groups"`
		Scaling   float64  `json:"scaling_factor"`
		Shift     *float64 `json:"shift_factor"`
		UpBlocks  []string `json:"up_block_types"`
		QuantPost *bool    `json:"use_post_quant_conv"`
	}
	if err := readJSON(path, &c); err != nil {
		return nil, nil, nil, err
	}
	if c.QuantPost != nil && *c.QuantPost {
		return nil, nil, nil, fmt.Errorf("%s: use_post_quant_conv is SD 1.x's VAE, not SD3's", path)
	}
	cfg := VAEConfig{LatentChannels: c.Latent, BlockOut: c.Blocks, LayersPerBlock: c.Layers, Groups: c.Groups, Scaling: c.Scaling}
	if c.Shift != nil {
		cfg.Shift = *c.Shift
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, nil, err
	}
	return cfg.VAEMetadata(), cfg.VAEDecoderTensors(), same, nil
}

func mmditPart(path string) (Metadata, []Spec, func(string) string, error) {
	var c struct {
		Patch      int     `json:"patch_size"`
		In         int     `json:"in_channels"`
		Out        int     `json:"out_channels"`
		Layers     int     `json:"num_layers"`
		Heads      int     `json:"num_attention_heads"`
		HeadDim    int     `json:"attention_head_dim"`
		Joint      int     `json:"joint_attention_dim"`
		Caption    int     `json:"caption_projection_dim"`
		Pooled     int     `json:"pooled_projection_dim"`
		Sample     int     `json:"sample_size"`
		PosMax     int     `json:"pos_embed_max_size"`
		QKNorm     *string `json:"qk_norm"`
		DualLayers []int   `json:"dual_attention_layers"`
	}
	if err := readJSON(path, &c); err != nil {
		return nil, nil, nil, err
	}
	if c.QKNorm != nil || len(c.DualLayers) > 0 {
		return nil, nil, nil, fmt.Errorf("%s: qk_norm and dual attention layers are SD3.5's; the ggml engine runs SD3-medium's transformer", path)
	}
	cfg := MMDiTConfig{PatchSize: c.Patch, InChannels: c.In, OutChannels: c.Out, Layers: c.Layers, Heads: c.Heads, HeadDim: c.HeadDim,
		JointDim: c.Joint, PooledDim: c.Pooled, SampleSize: c.Sample, PosEmbedMax: c.PosMax}
	if c.Caption != 0 && c.Caption != cfg.Width() {
		return nil, nil, nil, fmt.Errorf("%s: caption_projection_dim %d differs from the width %d", path, c.Caption, cfg.Width())
	}
	if err := cfg.Check(); err != nil {
		return nil, nil, nil, err
	}
	return cfg.MMDiTMetadata(), cfg.MMDiTTensors(), same, nil
}

func clipPart(path string) (Metadata, []Spec, func(string) string, error) {
	var c struct {
		Vocab     int    `json:"vocab_size"`
		Positions int    `json:"max_position_embeddings"`
		Width     int    `json:"hidden_size"`
		Layers    int    `json:"num_hidden_layers"`
		Heads     int    `json:"num_attention_heads"`
		FFN       int    `json:"intermediate_size"`
		Proj      int    `json:"projection_dim"`
		Act       string `json:"hidden_act"`
	}
	if err := readJSON(path, &c); err != nil {
		return nil, nil, nil, err
	}
	if c.Act != "quick_gelu" && c.Act != "gelu" {
		return nil, nil, nil, fmt.Errorf("%s: hidden_act %q, want quick_gelu or gelu", path, c.Act)
	}
	cfg := CLIPConfig{Vocab: c.Vocab, Positions: c.Positions, Width: c.Width, Layers: c.Layers, Heads: c.Heads, FFN: c.FFN,
		Projection: c.Proj, QuickGELU: c.Act == "quick_gelu"}
	if err := cfg.Check(); err != nil {
		return nil, nil, nil, err
	}
	return cfg.CLIPMetadata(), cfg.CLIPTensors(), same, nil
}

func t5Part(path string) (Metadata, []Spec, func(string) string, error) {
	var c struct {
		Vocab   int    `json:"vocab_size"`
		Width   int    `json:"d_model"`
		Layers  int    `json:"num_layers"`
		Heads   int    `json:"num_heads"`
		HeadDim int    `json:"d_kv"`
		FFN     int    `json:"d_ff"`
		Buckets int    `json:"relative_attention_num_buckets"`
		MaxDist int    `json:"relative_attention_max_distance"`
		FF      string `json:"feed_forward_proj"`
	}
	if err := readJSON(path, &c); err != nil {
		return nil, nil, nil, err
	}
	if c.FF != "gated-gelu" {
		return nil, nil, nil, fmt.Errorf("%s: feed_forward_proj %q, want gated-gelu (T5 v1.1, as SD3's)", path, c.FF)
	}
	cfg := T5Config{Vocab: c.Vocab, Width: c.Width, Layers: c.Layers, Heads: c.Heads, HeadDim: c.HeadDim, FFN: c.FFN,
		Buckets: c.Buckets, MaxDistance: c.MaxDist}
	if err := cfg.Check(); err != nil {
		return nil, nil, nil, err
	}
	// transformers saves the encoder under "encoder."; the embedding is
	// "shared.weight" (tied to encoder.embed_tokens).
	name := func(n string) string {
		if n == "shared.weight" {
			return n
		}
		return "encoder." + n
	}
	return cfg.T5Metadata(), cfg.T5Tensors(), name, nil
}
