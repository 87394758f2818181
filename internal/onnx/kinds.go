package onnx

import "strings"

// pipelineKind is one of the diffusers pipelines the backend runs: which
// parts the export has, what the denoiser's inputs are called, and the
// VAE's latent scaling when vae_decoder/config.json does not say.
type pipelineKind struct {
	name       string
	textParts  []string // text encoder directories, in CLIP-L, CLIP-G, T5 order
	tokenizers []string
	denoiser   string // "transformer" or "unet"
	io         denoiserNames
	scaling    float64
	shift      float64
}

// denoiserNames are the denoiser's input and output names; "" means the
// model has no such input.
type denoiserNames struct {
	latent, text, pooled, timeIDs, timestep, out string
}

var (
	kindSD3 = &pipelineKind{
		name:       "sd3",
		textParts:  []string{"text_encoder", "text_encoder_2", "text_encoder_3"},
		tokenizers: []string{"tokenizer", "tokenizer_2", "tokenizer_3"},
		denoiser:   "transformer",
		io:         denoiserNames{latent: "hidden_states", text: "encoder_hidden_states", pooled: "pooled_projections", timestep: "timestep", out: "out_hidden_states"},
		scaling:    1.5305,
		shift:      0.0609,
	}
	kindSD15 = &pipelineKind{
		name:       "sd15",
		textParts:  []string{"text_encoder"},
		tokenizers: []string{"tokenizer"},
		denoiser:   "unet",
		io:         denoiserNames{latent: "sample", text: "encoder_hidden_states", timestep: "timestep", out: "out_sample"},
		scaling:    0.18215,
	}
	kindSDXL = &pipelineKind{
		name:       "sdxl",
		textParts:  []string{"text_encoder", "text_encoder_2"},
		tokenizers: []string{"tokenizer", "tokenizer_2"},
		denoiser:   "unet",
		io:         denoiserNames{latent: "sample", text: "encoder_hidden_states", pooled: "text_embeds", timeIDs: "time_ids", timestep: "timestep", out: "out_sample"},
		scaling:    0.13025,
	}
)

// kindOf maps model_index.json's _class_name to a pipeline. Exports saved
// by optimum's or diffusers' ONNX pipelines carry an ORT or Onnx prefix.
func kindOf(class string) (*pipelineKind, bool) {
	class = strings.TrimPrefix(strings.TrimPrefix(class, "ORT"), "Onnx")
	switch class {
	case "StableDiffusion3Pipeline":
		return kindSD3, true
	case "StableDiffusionPipeline":
		return kindSD15, true
	case "StableDiffusionXLPipeline":
		return kindSDXL, true
	}
	return nil, false
}

func (k *pipelineKind) isUNet() bool { return k.denoiser == "unet" }
