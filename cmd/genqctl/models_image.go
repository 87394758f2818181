package main

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// writeTinyImage writes a tiny SD3 export (variant C) into dir, in the
// layout and with the names and dtypes of a real optimum export; with
// engine ggml, in SD3's real architecture and with the ggml engine's GGUF
// files beside it. It returns the path it wrote.
func writeTinyImage(dir, engine, size, weights string, seed int64) (string, error) {
	opts := tinyexport.Options{Pipeline: tinyexport.Pipeline(genq.VariantC.Spec().TestModel)}
	switch {
	case size == "medium" && engine == "ggml":
		dtype := sd3.DType(weights)
		if weights == "" {
			dtype = sd3.F16
		}
		if dtype != sd3.F16 && dtype != sd3.F32 {
			return "", usageError{fmt.Sprintf("--weights %q: the ggml image files are f16 or f32", weights)}
		}
		if err := tinyexport.WriteMediumGGML(dir, seed, dtype); err != nil {
			return "", fmt.Errorf("medium image model: %w", err)
		}
		return dir, nil
	case size != "tiny":
		return "", usageError{fmt.Sprintf("--size %q: variant C has tiny, and medium with --engine ggml (SD3-medium's shapes, random weights)", size)}
	}
	switch engine {
	case "onnx":
		if weights != "" {
			return "", usageError{"--weights applies to variant C's ggml files only (--engine ggml)"}
		}
	case "ggml":
		opts.Faithful, opts.GGMLWeights = true, sd3.DType(weights)
		if weights != "" && opts.GGMLWeights != sd3.F16 && opts.GGMLWeights != sd3.F32 {
			return "", usageError{fmt.Sprintf("--weights %q: the ggml image files are f16 or f32", weights)}
		}
	default:
		return "", usageError{fmt.Sprintf("--engine %q: want onnx or ggml", engine)}
	}
	if err := tinyexport.WriteWithOptions(dir, seed, opts); err != nil {
		return "", fmt.Errorf("tiny image model: %w", err)
	}
	return dir, nil
}
