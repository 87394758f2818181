package ggmlimage_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// Both ggml CLIPs against ONNX Runtime running the tiny export's faithful
// CLIPs: the penultimate hidden states and the projected end-token state,
// for two prompts padded as SD3 pads them.
func TestCLIPMatchesONNX(t *testing.T) {
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 5, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F32}); err != nil {
		t.Fatal(err)
	}
	for _, part := range []struct{ name, file string }{{"text_encoder", sd3.ClipLFile}, {"text_encoder_2", sd3.ClipGFile}} {
		t.Run(part.name, func(t *testing.T) {
			e, err := ggmlimage.OpenCLIP(filepath.Join(dir, part.file), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cfg := e.Config()
			const n, seq = 2, 77
			end := int32(cfg.Vocab - 1) // <|endoftext|>, the largest id
			rng := rand.New(rand.NewPCG(4, 4))
			ids := make([]int32, n*seq)
			ids64 := make([]int64, n*seq)
			for i := range n {
				row := ids[i*seq : (i+1)*seq]
				row[0] = end - 1 // <|startoftext|>
				words := 3 + 7*i
				for j := 1; j <= words; j++ {
					row[j] = int32(rng.IntN(int(end - 1)))
				}
				for j := words + 1; j < seq; j++ {
					row[j] = end
				}
			}
			for i, id := range ids {
				ids64[i] = int64(id)
			}
			hidden, pooled, err := e.Encode(ids, n, seq)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, part.name, "model.onnx")
			for _, out := range []struct {
				name  string
				got   []float32
				shape []int64
			}{
				{fmt.Sprintf("hidden_states.%d", cfg.Layers-1), hidden, []int64{n, seq, int64(cfg.Width)}},
				{"text_embeds", pooled, []int64{n, int64(cfg.Projection)}},
			} {
				want := runONNXIDs(t, path, ids64, []int64{n, seq}, out.name, out.shape)
				checkNear(t, out.name, out.got, want, 1e-3)
			}
		})
	}
}
