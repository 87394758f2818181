package main

import (
	"path/filepath"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// writeTinyText writes a random-weight llama GGUF for variant A (Q4_0) or B
// (BF16), or in the weights asked for, into dir and returns its path.
func writeTinyText(v genq.Variant, dir, size, weights string, seed int64) (string, error) {
	path := filepath.Join(dir, tinygguf.FileName(v, size))
	opts := tinygguf.OptionsFor(v, size, seed)
	if weights != "" {
		opts.Weights = tinygguf.Weights(weights)
	}
	if err := tinygguf.Write(path, opts); err != nil {
		return "", err
	}
	return path, nil
}
