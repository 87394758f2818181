package ggmlimage_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/onnx/tinyexport"
	"github.com/genq/genq/internal/sd3"
)

// The ggml T5 against ONNX Runtime running the tiny export's faithful T5,
// on two sequences of SD3's 256 tokens.
func TestT5MatchesONNX(t *testing.T) {
	dir := t.TempDir()
	if err := tinyexport.WriteWithOptions(dir, 5, tinyexport.Options{Faithful: true, Float32: true, GGMLWeights: sd3.F32}); err != nil {
		t.Fatal(err)
	}
	e, err := ggmlimage.OpenT5(filepath.Join(dir, sd3.T5File), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n, seq = 2, 256
	rng := rand.New(rand.NewPCG(6, 6))
	ids := make([]int32, n*seq)
	ids64 := make([]int64, n*seq)
	for i := range n {
		words := 5 + 30*i
		for j := range words {
			ids[i*seq+j] = int32(3 + rng.IntN(e.Config().Vocab-3))
		}
		ids[i*seq+words] = 1 // </s>, then <pad> (0)
	}
	for i, id := range ids {
		ids64[i] = int64(id)
	}
	got, err := e.Encode(ids, n, seq)
	if err != nil {
		t.Fatal(err)
	}
	want := runONNXIDs(t, filepath.Join(dir, "text_encoder_3", "model.onnx"), ids64, []int64{n, seq}, "last_hidden_state", []int64{n, seq, int64(e.Config().Width)})
	checkNear(t, "last_hidden_state", got, want, 1e-3)
}
