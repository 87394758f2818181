package main

import (
	"context"
	"fmt"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
)

// runModels handles "genqctl models tiny": it writes a small model with
// random weights in the real format of the variant, for tests and demos.
func runModels(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "tiny" {
		return usageError{"usage: genqctl models tiny --variant A|B|C --dir DIR [--family llama|qwen3|mistral] [--size tiny|mid|8b|70b|medium] [--weights q4_0|f16|bf16|f32] [--engine onnx|ggml] [--seed N]"}
	}
	fs := envflag.New("genqctl models tiny", e.getenv, e.stderr)
	var variant, dir, family, size, weights, engine string
	var seed int64
	fs.String(&variant, "variant", "VARIANT", "B", "variant whose model to write: A, B or C")
	fs.String(&dir, "dir", "", "", "directory to write into (default models/<variant>)")
	fs.String(&family, "family", "", "", "text models only: the model family, llama (Llama 3.x, the default), qwen3 (Qwen3) or mistral (Mistral Nemo), each with its own architecture, tokenizer, special tokens and chat template; the variant still picks the weights' format")
	fs.String(&size, "size", "", "tiny", "tiny (tests); text: mid (about 100M parameters, for CPU benchmarks), 8b or 70b (llama only: Llama 3 shapes with its 128,256-token vocabulary, for GPU benchmarks: 16 GB in BF16, 40 GB in Q4_0); variant C with --engine ggml: medium (SD3-medium's shapes, 15.6 GB in fp16, for GPU benchmarks)")
	fs.String(&weights, "weights", "", "", "text models only: how the matrices are stored, q4_0, f16, bf16 or f32 (default the variant's: q4_0 for A, bf16 for B), to compare formats on the same shape")
	fs.String(&engine, "engine", "", "onnx", "variant C only: onnx writes the ONNX export with cheap stand-in graphs; ggml writes every part in SD3's real architecture, as the ONNX export and as the ggml engine's GGUF files (f16, or --weights f32), with the same weights, so the two engines can be compared")
	fs.Int64(&seed, "seed", "", 1, "seed of the random weights: the same seed writes the same model")
	if err := fs.Parse(args[1:]); err != nil {
		return flagError(err)
	}
	v, err := genq.ParseVariant(variant)
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
