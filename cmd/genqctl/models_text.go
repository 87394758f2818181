package main

import (
	"path/filepath"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggml/tinygguf"
)

// writeTinyText writes a random-weight llama GGUF for variant A (Q4_0) or B
// (F16) into dir and returns its path.
func writeTinyText(v genq.Variant, dir, size string, seed int64) (string, error) {
	path := filepath.Join(dir, tinygguf.FileName(v, size))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(v, size, seed)); err != nil {
		return "", err
	}
	return path, nil
}
