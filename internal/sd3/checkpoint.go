package sd3

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// WriteTinyDiffusers writes a tiny SD3 checkpoint as diffusers saves one,
// for tests of the conversion:
// each part's config.json (diffusers' and transformers' keys) and fp16
// safetensors in their names, the VAE's encoder included, T5 under
// "encoder." with its embedding saved as encoder.embed_tokens.
// mutate, when set, may change a part's weights before they are written.
func WriteTinyDiffusers(dir string, mutate func(part string, w Weights)) error {
	vae, mmdit := TinyVAE(), TinyMMDiT()
	clipL, clipG, t5 := TinyCLIP(300, 8, true), TinyCLIP(300, 12, false), TinyT5(120, 24)
	parts := map[string]struct {
		config  map[string]any
		weights Weights
	}{
		"vae": {map[string]any{"_class_name": "AutoencoderKL", "latent_channels": vae.LatentChannels, "block_out_channels": vae.BlockOut,
			"layers_per_block": vae.LayersPerBlock, "norm_num_groups": vae.Groups, "scaling_factor": vae.Scaling, "shift_factor": vae.Shift,
			"use_post_quant_conv": false}, RandomWeights(vae.VAEDecoderTensors(), 1)},
		"transformer": {map[string]any{"_class_name": "SD3Transformer2DModel", "patch_size": mmdit.PatchSize, "in_channels": mmdit.InChannels,
			"out_channels": mmdit.OutChannels, "num_layers": mmdit.Layers, "num_attention_heads": mmdit.Heads, "attention_head_dim": mmdit.HeadDim,
			"joint_attention_dim": mmdit.JointDim, "caption_projection_dim": mmdit.Width(), "pooled_projection_dim": mmdit.PooledDim,
			"sample_size": mmdit.SampleSize, "pos_embed_max_size": mmdit.PosEmbedMax}, mmdit.RandomMMDiTWeights(2)},
		"text_encoder":   {clipJSON(clipL, "quick_gelu"), RandomWeights(clipL.CLIPTensors(), 3)},
		"text_encoder_2": {clipJSON(clipG, "gelu"), RandomWeights(clipG.CLIPTensors(), 4)},
		"text_encoder_3": {map[string]any{"vocab_size": t5.Vocab, "d_model": t5.Width, "num_layers": t5.Layers, "num_heads": t5.Heads,
			"d_kv": t5.HeadDim, "d_ff": t5.FFN, "relative_attention_num_buckets": t5.Buckets, "relative_attention_max_distance": t5.MaxDistance,
			"feed_forward_proj": "gated-gelu"}, RandomWeights(t5.T5Tensors(), 5)},
	}
	for part, p := range parts {
		w := p.weights
		switch part {
		case "vae": // the encoder is saved too; the engine needs only the decoder
			w["encoder.conv_in.weight"] = Tensor{Shape: []int{8, 3, 3, 3}, Data: make([]float32, 8*27)}
		case "text_encoder_3":
			saved := Weights{}
			for name, tensor := range w {
				if name == "shared.weight" {
					name = "embed_tokens.weight"
				}
				saved["encoder."+name] = tensor
			}
			w = saved
		}
		if mutate != nil {
			mutate(part, w)
		}
		raw, err := json.Marshal(p.config)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, part), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, part, "config.json"), raw, 0o644); err != nil {
			return err
		}
		if err := WriteSafetensors(filepath.Join(dir, part, "model.safetensors"), w, F16); err != nil {
			return err
		}
	}
	return nil
}

func clipJSON(c CLIPConfig, act string) map[string]any {
	return map[string]any{"vocab_size": c.Vocab, "max_position_embeddings": c.Positions, "hidden_size": c.Width, "num_hidden_layers": c.Layers,
		"num_attention_heads": c.Heads, "intermediate_size": c.FFN, "projection_dim": c.Projection, "hidden_act": act}
}
