package main

import (
	"errors"

	"github.com/genq/genq/internal/genq"
)

// writeTinyText is implemented by the text backend work (issue 3). It returns
// the path it wrote.
func writeTinyText(v genq.Variant, dir, size string, seed int64) (string, error) {
	return "", errors.New("tiny text models: not built yet")
}
