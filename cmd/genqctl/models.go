package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// DefaultEmbeddingDir is where make run keeps its embedding model.
const DefaultEmbeddingDir = "models/embedding"

// runModels handles "genqctl models tiny": it writes a small model with
// random weights in the real format of the variant, for tests and demos.
func runModels(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "tiny" {
		return usageError{"usage: genqctl models tiny --variant A|B|C --dir DIR [--family llama|qwen3|mistral|gpt-oss|bert] [--size tiny|mid|8b|70b|medium] [--weights q4_0|f16|bf16|f32] [--engine onnx|ggml] [--seed N]"}
	}
	var c ctlconfig.Models
	fs := envflag.New("genqctl models tiny", e.getenv, e.stderr)
	c.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return flagError(err)
	}
	dir, family, size, weights, engine, seed := c.Dir, c.Family, c.Size, c.Weights, c.Engine, c.Seed
	if family == string(tinygguf.FamilyBERT) {
		// An embedding model is no variant's: the variant is not read.
		path := filepath.Join(cmp.Or(dir, DefaultEmbeddingDir), tinygguf.BERTFileName(size))
		if err := tinygguf.WriteBERT(path, size, tinygguf.Weights(weights), seed); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote a tiny embedding model with random weights to %s (its vectors are noise)\n", path)
		return nil
	}
	v, err := genq.ParseVariant(c.Variant)
	if err != nil {
		return usageError{err.Error()}
	}
	if dir == "" {
		dir = "models/" + string(v)
	}
	var path string
	if v.Kind() == genq.OutputText {
		path, err = writeTinyText(v, dir, family, size, weights, seed)
	} else if family != "" {
		return usageError{"--family: text models only (variants A and B)"}
	} else {
		path, err = writeTinyImage(dir, engine, size, weights, seed)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote a tiny variant %s model with random weights to %s (its output is noise)\n", v, path)
	return nil
}
