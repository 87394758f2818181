package tinyexport

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/genq/genq/internal/diffusion/tokenizer"
	"github.com/genq/genq/internal/sd3"
)

func TestWriteIsDeterministicPerSeed(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, seed := range map[string]int64{a: 1, b: 1, c: 2} {
		if err := Write(dir, seed); err != nil {
			t.Fatal(err)
		}
	}
	same, differ := 0, 0
	err := filepath.WalkDir(a, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, path)
		x, _ := os.ReadFile(path)
		y, _ := os.ReadFile(filepath.Join(b, rel))
		z, _ := os.ReadFile(filepath.Join(c, rel))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes with seed 1", rel)
		}
		if filepath.Ext(rel) == ".onnx" {
			if bytes.Equal(x, z) {
				same++
			} else {
				differ++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if differ != 5 || same != 0 {
		t.Errorf("seed 2 changed %d of 5 models", differ)
	}
}

func TestTokenizersOfTheExport(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	l, err := tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tokenizer.LoadCLIP(filepath.Join(dir, "tokenizer_2"))
	if err != nil {
		t.Fatal(err)
	}
	// Like SD3: CLIP-L pads with its end token, CLIP-G with "!" (id 0).
	if l.PadID() == 0 || g.PadID() != 0 {
		t.Errorf("pad ids %d and %d, want end token and 0", l.PadID(), g.PadID())
	}
	if toks := l.Tokens("cat"); len(toks) != 1 {
		t.Errorf("whole-word merges missing: \"cat\" → %v", toks)
	}
	// Both T5 files describe the same vocabulary.
	fromJSON, err := tokenizer.LoadT5(filepath.Join(dir, "tokenizer_3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "tokenizer_3", "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	fromSP, err := tokenizer.LoadT5(filepath.Join(dir, "tokenizer_3"))
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "A photo of the cat, riding a horse!"
	a, b := fromJSON.Encode(prompt, 16), fromSP.Encode(prompt, 16)
	if !slices.Equal(a, b) {
		t.Errorf("tokenizer.json gives %v, spiece.model %v", a, b)
	}
}

// A faithful export writes every model in its real architecture, and adds
// their GGUF files; the default writes no GGUF.
func TestFaithfulExportChangesEveryModel(t *testing.T) {
	plain, faithful := t.TempDir(), t.TempDir()
	if err := Write(plain, 3); err != nil {
		t.Fatal(err)
	}
	if err := WriteWithOptions(faithful, 3, Options{Faithful: true}); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae_decoder"} {
		x, _ := os.ReadFile(filepath.Join(plain, part, "model.onnx"))
		y, _ := os.ReadFile(filepath.Join(faithful, part, "model.onnx"))
		if bytes.Equal(x, y) {
			t.Errorf("%s is the stand-in's", part)
		}
	}
	for _, f := range []string{sd3.VAEDecoderFile, sd3.TransformerFile, sd3.ClipLFile, sd3.ClipGFile, sd3.T5File} {
		if _, err := os.Stat(filepath.Join(faithful, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(plain, sd3.VAEDecoderFile)); err == nil {
		t.Error("the default export wrote a GGUF")
	}
}
