package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoFile is Locate's error for a directory with no .gguf file in it.
var ErrNoFile = errors.New("no .gguf file")

// Locate picks the model file a backend loads: file, under dir unless it is
// absolute, or else dir's one .gguf file. fileSetting names the setting
// that picks one of several, for the error that asks for it.
func Locate(dir, file, fileSetting string) (string, error) {
	if file != "" {
		if !filepath.IsAbs(file) && dir != "" {
			return filepath.Join(dir, file), nil
		}
		return file, nil
	}
	if dir == "" {
		return "", errors.New("neither a model directory nor a model file is set")
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w in %s", ErrNoFile, dir)
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("%d .gguf files in %s (%s): name one with %s",
		len(matches), dir, strings.Join(matches, ", "), fileSetting)
}

// CheckMagic checks that path is a readable file that starts as GGUF does,
// so that a wrong file is named as such rather than as whatever an engine
// makes of it.
func CheckMagic(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte(Magic)) {
		return fmt.Errorf("%s: not a GGUF file (it does not start with the GGUF magic)", path)
	}
	return nil
}

// Find is Locate's file, checked to be GGUF (CheckMagic): what a backend
// opens.
func Find(dir, file, fileSetting string) (string, error) {
	path, err := Locate(dir, file, fileSetting)
	if err != nil {
		return "", err
	}
	return path, CheckMagic(path)
}
