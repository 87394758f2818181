// Package genq holds the domain words shared by every part of genq: the
// variants it serves, the jobs that travel on the queue, their results, and
// the one error type whose code decides what a caller is told.
package genq

import (
	"fmt"
	"strings"
)

// Variant names one of the three deployments of the HTTP contract.
type Variant string

const (
	VariantA Variant = "A" // text, 70B-class instruct model, 4-bit
	VariantB Variant = "B" // text, 8B-class instruct model, 16-bit
	VariantC Variant = "C" // images, SD3-medium-class diffusion model, fp16
)

// Variants lists every variant, in order.
var Variants = []Variant{VariantA, VariantB, VariantC}

// ParseVariant accepts "A", "b", … and reports an invalid error otherwise.
func ParseVariant(s string) (Variant, error) {
	v := Variant(strings.ToUpper(strings.TrimSpace(s)))
	switch v {
	case VariantA, VariantB, VariantC:
		return v, nil
	}
	return "", Errorf(Invalid, "unknown variant %q: want A, B or C", s)
}

// Kind says what a variant, or a catalogue model's queue token, produces.
func (v Variant) Kind() OutputKind {
	if IsModelQueue(v) {
		return queueKind(v).Output()
	}
	return v.Spec().Kind
}

// Spec is what genq knows about a variant, in one place: the worker, the
// deploy manifests, the model hub client and the test-model writers all
// read their per-variant facts here.
type Spec struct {
	Kind OutputKind
	// Slots is how many jobs a worker runs at once unless SLOTS says
	// otherwise; for text, the width of the continuous batch.
	Slots int
	// Hub is the model genqctl download fetches by default.
	Hub HubModel
	// HubGGML is what genqctl download --engine ggml fetches for an image
	// variant: the diffusers checkpoint it converts to the ggml engine's
	// GGUF files.
	HubGGML HubModel
	// TestModel is what the tiny random-weight model of the variant is
	// written as: the GGUF weight type of a text model (q4_0, or bf16 as
	// the hub model's own file is), the diffusers pipeline of an image
	// export (sd3).
	TestModel string
}

// HubModel is a model repository on the model hub and the files of it the
// worker needs (docs/download.md says why these).
type HubModel struct {
	Repo string
	// Include selects the files. GGUF repositories hold a dozen
	// quantisations of the same model; the patterns pick one. They belong
	// to Repo: with another repository they do not apply.
	Include []string
	About   string
}

// Spec returns the facts of variant v; the zero Spec for an unknown one.
func (v Variant) Spec() Spec {
	switch v {
	case VariantA:
		return Spec{
			Kind: OutputText,
			// A 70B model on one A100 has room for fewer sequences than B.
			Slots: 4,
			Hub: HubModel{
				Repo: "bartowski/Meta-Llama-3.1-70B-Instruct-GGUF",
				// One 42.5 GB file; the second pattern also matches the
				// split layout (<name>-Q4_K_M/<name>-Q4_K_M-0000N-of-0000M.gguf)
				// some GGUF repositories use for files over the hub's 50 GB limit.
				Include: []string{"*-Q4_K_M.gguf", "*-Q4_K_M-*-of-*.gguf"},
				About:   "Llama 3.1 70B Instruct, GGUF Q4_K_M (4-bit)",
			},
			TestModel: "q4_0",
		}
	case VariantB:
		return Spec{
			Kind:  OutputText,
			Slots: 8,
			Hub: HubModel{
				Repo:    "unsloth/Llama-3.1-8B-Instruct-GGUF",
				Include: []string{"*-BF16.gguf", "*-BF16-*-of-*.gguf"},
				About:   "Llama 3.1 8B Instruct, GGUF BF16 (16-bit, not quantised)",
			},
			TestModel: "bf16",
		}
	case VariantC:
		return Spec{
			Kind: OutputImage,
			// One image at a time is fastest on one GPU (docs/image.md).
			Slots: 1,
			Hub: HubModel{
				Repo: "TensorStack/StableDiffusion3-Medium-amuse",
				// The diffusers layout of ONNX graphs with external weights,
				// tokenizers and configs; no sample images.
				Include: []string{"*.onnx", "*.onnx.data", "*.onnx_data", "*.json", "*.txt", "*.model"},
				About:   "Stable Diffusion 3 Medium, ONNX export (fp16)",
			},
			HubGGML: HubModel{
				Repo: "stabilityai/stable-diffusion-3-medium-diffusers",
				// The safetensors of every part, their configs, the
				// tokenizers and the scheduler config.
				Include: []string{"model_index.json", "scheduler/*", "tokenizer*/*", "text_encoder*/*.json", "text_encoder*/*.safetensors",
					"transformer/*.json", "transformer/*.safetensors", "vae/*.json", "vae/*.safetensors"},
				About: "Stable Diffusion 3 Medium, diffusers checkpoint (fp16), converted to GGUF for the ggml engine",
			},
			TestModel: "sd3",
		}
	}
	return Spec{}
}

func (v Variant) String() string { return string(v) }

// OutputKind is what a variant's jobs produce.
type OutputKind string

const (
	OutputText  OutputKind = "text"
	OutputImage OutputKind = "image"
	// OutputEmbedding is the vectors of an embedding model's jobs.
	OutputEmbedding OutputKind = "embedding"
)

// ContentType is the media type of a result of this kind.
func (k OutputKind) ContentType() string {
	if k == OutputImage {
		return "image/png"
	}
	return "application/json"
}

var _ fmt.Stringer = VariantA

// DefaultModelDir is where a variant's model lives: /models inside genq's
// images, which set GENQ_IN_CONTAINER=1, and models/<variant> elsewhere. An
// explicit variable rather than sniffing /.dockerenv: BuildKit builds,
// where the download runs, have no such file.
func DefaultModelDir(v Variant, inContainer bool) string {
	if inContainer {
		return "/models"
	}
	return "models/" + string(v)
}
