package tinygguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/genq/genq/internal/genq"
)

func TestWriteTinyModelIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v genq.Variant, seed int64) []byte {
		p := filepath.Join(dir, name)
		if err := Write(p, OptionsFor(v, "tiny", seed)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
		a, again, other := write("a.gguf", v, 5), write("b.gguf", v, 5), write("c.gguf", v, 6)
		if !bytes.Equal(a, again) {
			t.Errorf("variant %s: seed 5 wrote two different files", v)
		}
		if bytes.Equal(a, other) {
			t.Errorf("variant %s: seeds 5 and 6 wrote the same file", v)
		}
	}
}

func TestTinyModelMetadata(t *testing.T) {
	tests := []struct {
		v        genq.Variant
		fileType string
		matrix   fsggml.TensorType
	}{
		{genq.VariantA, "Q4_0", fsggml.TensorTypeQ4_0},
		{genq.VariantB, "BF16", fsggml.TensorTypeBF16},
	}
	for _, tt := range tests {
		t.Run(string(tt.v), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName(tt.v, "tiny"))
			if err := Write(p, OptionsFor(tt.v, "tiny", 1)); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			meta, err := fsggml.Decode(f, -1)
			if err != nil {
				t.Fatal(err)
			}
			kv := meta.KV()
			if kv.Architecture() != "llama" || kv.FileType().String() != tt.fileType {
				t.Fatalf("architecture %q file type %q", kv.Architecture(), kv.FileType())
			}
			// The engine reads these with strict types.
			for key, want := range map[string]any{
				"llama.block_count":                      uint32(0),
				"llama.attention.head_count":             uint32(0),
				"llama.attention.layer_norm_rms_epsilon": float32(0),
				"tokenizer.ggml.bos_token_id":            uint32(0),
				"tokenizer.chat_template":                "",
			} {
				if got := kv[key]; got == nil || typeName(got) != typeName(want) {
					t.Errorf("%s is %T, want %T", key, got, want)
				}
			}
			tokens, types := kv.Strings("tokenizer.ggml.tokens"), kv.Ints("tokenizer.ggml.token_type")
			if len(tokens) != len(types) || len(tokens) < 256 {
				t.Fatalf("%d tokens, %d types", len(tokens), len(types))
			}
			for _, s := range Llama3Specials() {
				i := indexOf(tokens, s)
				if i < 0 || types[i] != 3 {
					t.Errorf("special %s: index %d, want a control token (type 3)", s, i)
				}
			}
			for _, tensor := range meta.Tensors().Items() {
				want := tt.matrix
				if len(tensor.Shape) == 1 {
					want = fsggml.TensorTypeF32 // norms stay full precision
				}
				if fsggml.TensorType(tensor.Kind) != want {
					t.Errorf("tensor %s is %v, want %v", tensor.Name, fsggml.TensorType(tensor.Kind), want)
				}
			}
		})
	}
}

func typeName(v any) string { return fmtType(v) }

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

func TestTinyOptionsRejected(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.gguf")
	if err := Write(p, Options{Weights: WeightsQ4_0, Size: "huge"}); err == nil {
		t.Error("size huge: want an error")
	}
	if err := Write(p, Options{Weights: "q3", Size: "tiny"}); err == nil {
		t.Error("weights q3: want an error")
	}
}

func TestQuantizeQ4_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 32*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	x[5] = -4 // the largest magnitude of its block, negative
	got := dequantizeQ4_0(appendQ4_0(nil, x))
	if len(got) != len(x) {
		t.Fatalf("%d weights back, want %d", len(got), len(x))
	}
	for b := 0; b < len(x); b += 32 {
		var amax float64
		for _, v := range x[b : b+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		// One level is amax/8. The extreme weight takes code 0, so the
		// other side reaches only 7 levels: weights beyond that clamp.
		step := amax / 8
		for i := b; i < b+32; i++ {
			bound := step/2*1.01 + 1e-6
			if math.Abs(float64(x[i])) > 7*step {
				bound = step*1.01 + 1e-6
			}
			if d := math.Abs(float64(got[i] - x[i])); d > bound {
				t.Fatalf("weight %d: %v came back as %v (error %v > %v)", i, x[i], got[i], d, bound)
			}
		}
	}
	// The extreme weight maps to code 0 exactly, so it is reproduced up to
	// the fp16 rounding of the scale.
	if math.Abs(float64(got[5]+4)) > 4e-3 {
		t.Fatalf("extreme weight -4 came back as %v", got[5])
	}
	zeros := dequantizeQ4_0(appendQ4_0(nil, make([]float32, 32)))
	for _, v := range zeros {
		if v != 0 {
			t.Fatalf("a zero block came back as %v", zeros)
		}
	}
}

func fmtType(v any) string {
	switch v.(type) {
	case uint32:
		return "uint32"
	case float32:
		return "float32"
	case string:
		return "string"
	}
	return "other"
}

func TestFullVocabularyHasLlama3Ids(t *testing.T) {
	tokens, types, _ := vocabulary(true)
	if len(tokens) != 128256 || len(types) != len(tokens) {
		t.Fatalf("%d tokens, %d types; want 128256 of each", len(tokens), len(types))
	}
	for id, want := range map[int]string{128000: "<|begin_of_text|>", 128006: "<|start_header_id|>", 128009: "<|eot_id|>", 128255: "<|reserved_special_token_247|>"} {
		if tokens[id] != want || types[id] != tokenControl {
			t.Errorf("token %d is %q of type %d, want the control token %q", id, tokens[id], types[id], want)
		}
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Fatalf("token %q appears twice", tok)
		}
		seen[tok] = true
	}
}

// The weights of a tensor do not depend on which chunk boundaries its
// writer crossed: a tensor two chunks long starts with the same bytes as
// one chunk long.
func TestRandomTensorChunksAreStable(t *testing.T) {
	write := func(n int) []byte {
		var b bytes.Buffer
		if _, err := (randomTensor{seed: 3, name: "w", n: n, std: 1, kind: fsggml.TensorTypeF16}).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != 2*n {
			t.Fatalf("%d weights wrote %d bytes, want %d", n, b.Len(), 2*n)
		}
		return b.Bytes()
	}
	one, two := write(chunkWeights), write(2*chunkWeights+96)
	if !bytes.Equal(one, two[:len(one)]) {
		t.Error("the first chunk changed when the tensor grew")
	}
	if bytes.Equal(two[:len(one)], two[len(one):2*len(one)]) {
		t.Error("two chunks drew the same weights")
	}
}

// TestBF16RoundsToNearestEven: bfloat16 keeps a float32's upper half,
// rounded to the nearest value, ties to the even one.
func TestBF16RoundsToNearestEven(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2.5, 0xc020},
		{1 + 1.0/256, 0x3f80},  // halfway between 0x3f80 and 0x3f81: to the even one
		{1 + 3.0/256, 0x3f82},  // halfway between 0x3f81 and 0x3f82: to the even one
		{1 + 1.5/256, 0x3f81},  // above halfway: up
		{1 + 0.75/256, 0x3f80}, // below halfway: down
	} {
		got := binary.LittleEndian.Uint16(appendBF16(nil, []float32{c.in}))
		if got != c.want {
			t.Errorf("bf16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}
