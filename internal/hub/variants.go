package hub

import "github.com/genq/genq/internal/genq"

// Preset is a variant's default model on the hub.
type Preset struct {
	Repo string
	// Include selects the files the worker needs. GGUF repositories hold
	// a dozen quantisations of the same model; the pattern picks one. The
	// patterns belong to Repo: with another repository they do not apply.
	Include []string
	About   string
}

// VariantPreset is the default repository and patterns of a variant
// (docs/download.md says why these).
func VariantPreset(v genq.Variant) (Preset, bool) {
	switch v {
	case genq.VariantA:
		return Preset{
			Repo: "bartowski/Meta-Llama-3.1-70B-Instruct-GGUF",
			// One 42.5 GB file; the second pattern also matches the
			// split layout (<name>-Q4_K_M/<name>-Q4_K_M-0000N-of-0000M.gguf)
			// some GGUF repositories use for files over the hub's 50 GB limit.
			Include: []string{"*-Q4_K_M.gguf", "*-Q4_K_M-*-of-*.gguf"},
			About:   "Llama 3.1 70B Instruct, GGUF Q4_K_M (4-bit)",
		}, true
	case genq.VariantB:
		return Preset{
			Repo:    "unsloth/Llama-3.1-8B-Instruct-GGUF",
			Include: []string{"*-BF16.gguf", "*-BF16-*-of-*.gguf"},
			About:   "Llama 3.1 8B Instruct, GGUF BF16 (16-bit, not quantised)",
		}, true
	case genq.VariantC:
		return Preset{
			Repo: "TensorStack/StableDiffusion3-Medium-amuse",
			// The diffusers layout of ONNX graphs with external weights,
			// tokenizers and configs; no sample images.
			Include: []string{"*.onnx", "*.onnx.data", "*.onnx_data", "*.json", "*.txt", "*.model"},
			About:   "Stable Diffusion 3 Medium, ONNX export (fp16)",
		}, true
	}
	return Preset{}, false
}
