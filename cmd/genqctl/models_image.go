package main

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/onnx/tinyexport"
)

// writeTinyImage writes a tiny SD3 export (variant C) into dir, in the
// layout and with the names and dtypes of a real optimum export. It returns
// the path it wrote.
func writeTinyImage(dir string, seed int64) (string, error) {
	opts := tinyexport.Options{Pipeline: tinyexport.Pipeline(genq.VariantC.Spec().TestModel)}
	if err := tinyexport.WriteWithOptions(dir, seed, opts); err != nil {
		return "", fmt.Errorf("tiny image model: %w", err)
	}
	return dir, nil
}
