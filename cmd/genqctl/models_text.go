package main

import (
	"path/filepath"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// writeTinyText writes a random-weight GGUF of a model family (llama when
// family is empty) for variant A (Q4_0) or B (BF16), or in the weights asked
// for, into dir and returns its path.
func writeTinyText(v genq.Variant, dir, family, size, weights string, seed int64) (string, error) {
	f, err := tinygguf.ParseFamily(family)
	if err != nil {
		return "", usageError{err.Error()}
	}
	path := filepath.Join(dir, tinygguf.FamilyFileName(f, v, size))
	opts := tinygguf.OptionsFor(v, size, seed)
	opts.Family = f
	if weights != "" {
		opts.Weights = tinygguf.Weights(weights)
	}
	if err := tinygguf.Write(path, opts); err != nil {
		return "", err
	}
	return path, nil
}
