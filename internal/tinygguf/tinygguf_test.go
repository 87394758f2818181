package tinygguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
)

func TestWriteTinyModelIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, f Family, v genq.Variant, seed int64) []byte {
		p := filepath.Join(dir, name)
		opts := OptionsFor(v, "tiny", seed)
		opts.Family = f
		if err := Write(p, opts); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, f := range Families {
		for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
			a, again, other := write("a.gguf", f, v, 5), write("b.gguf", f, v, 5), write("c.gguf", f, v, 6)
			if !bytes.Equal(a, again) {
				t.Errorf("%s, variant %s: seed 5 wrote two different files", f, v)
			}
			if bytes.Equal(a, other) {
				t.Errorf("%s, variant %s: seeds 5 and 6 wrote the same file", f, v)
			}
		}
	}
}

// readModel writes a model with opts and reads its header back.
func readModel(t *testing.T, opts Options) *gguf.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(p, opts); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestTinyModelMetadata(t *testing.T) {
	tests := []struct {
		v        genq.Variant
		fileType uint32
		matrix   gguf.TensorType
	}{
		{genq.VariantA, 2, gguf.TensorQ4_0},  // MOSTLY_Q4_0
		{genq.VariantB, 32, gguf.TensorBF16}, // MOSTLY_BF16
	}
	for _, f := range Families {
		for _, tt := range tests {
			t.Run(string(f)+"/"+string(tt.v), func(t *testing.T) {
				opts := OptionsFor(tt.v, "tiny", 1)
				opts.Family = f
				file := readModel(t, opts)
				arch := map[Family]string{FamilyLlama: "llama", FamilyQwen3: "qwen3", FamilyMistral: "llama", FamilyGPTOSS: "gpt-oss"}[f]
				if got := file.Value("general.architecture"); got != arch {
					t.Fatalf("architecture %v, want %s", got, arch)
				}
				if got := file.Value("general.file_type"); got != tt.fileType {
					t.Fatalf("file type %v, want %d", got, tt.fileType)
				}
				// llama.cpp reads these with strict types.
				for key, want := range map[string]any{
					arch + ".block_count":                      uint32(0),
					arch + ".context_length":                   uint32(0),
					arch + ".attention.head_count":             uint32(0),
					arch + ".attention.layer_norm_rms_epsilon": float32(0),
					"tokenizer.ggml.bos_token_id":              uint32(0),
					"tokenizer.ggml.eos_token_id":              uint32(0),
					"tokenizer.ggml.add_bos_token":             false,
					"tokenizer.ggml.token_type":                []int32(nil),
					"tokenizer.ggml.merges":                    []string(nil),
					"tokenizer.chat_template":                  "",
				} {
					if got := file.Value(key); got == nil || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
						t.Errorf("%s is %T, want %T", key, got, want)
					}
				}
				tokens, _ := file.Value("tokenizer.ggml.tokens").([]string)
				types, _ := file.Value("tokenizer.ggml.token_type").([]int32)
				if len(tokens) != len(types) || len(tokens) < 256 {
					t.Fatalf("%d tokens, %d types", len(tokens), len(types))
				}
				emb, ok := file.Tensor("token_embd.weight")
				if !ok || emb.Shape[1] != uint64(len(tokens)) {
					t.Fatalf("token_embd.weight %v for %d tokens", emb.Shape, len(tokens))
				}
				for _, tensor := range file.Tensors {
					want := tt.matrix
					if len(tensor.Shape) == 1 || strings.HasSuffix(tensor.Name, ".bias") {
						want = gguf.TensorF32 // norms, sinks and biases stay full precision
					}
					if tensor.Type != want {
						t.Errorf("tensor %s is %v, want %v", tensor.Name, tensor.Type, want)
					}
				}
			})
		}
	}
}

// Each family carries its own special tokens at the types real files give
// them, and names its end-of-turn token as they do.
func TestFamilySpecialTokens(t *testing.T) {
	tests := []struct {
		f       Family
		control []string
		user    []string // user-defined: matched in any text, kept on output
		ids     map[string]string
		noKeys  []string
	}{
		{FamilyLlama, Llama3Specials(), nil,
			map[string]string{"bos_token_id": "<|begin_of_text|>", "eos_token_id": "<|eot_id|>"}, nil},
		{FamilyQwen3,
			[]string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_pad|>", "<|fim_prefix|>", "<|file_sep|>"},
			[]string{"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"},
			map[string]string{"eos_token_id": "<|im_end|>", "bos_token_id": "<|endoftext|>", "padding_token_id": "<|endoftext|>"},
			// No end-of-turn key: llama.cpp finds <|im_end|> by its text.
			[]string{"tokenizer.ggml.eot_token_id"}},
		{FamilyMistral,
			[]string{"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
				"[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "<SPECIAL_20>", "<SPECIAL_999>"},
			nil,
			map[string]string{"bos_token_id": "<s>", "eos_token_id": "</s>", "unknown_token_id": "<unk>"}, nil},
		// Control tokens in the file, as converted; llama.cpp makes the
		// headers' user-defined when it loads them.
		{FamilyGPTOSS,
			[]string{"<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>"},
			nil,
			map[string]string{"bos_token_id": "<|startoftext|>", "eos_token_id": "<|return|>", "padding_token_id": "<|endoftext|>"}, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.f), func(t *testing.T) {
			file := readModel(t, Options{Family: tt.f, Weights: WeightsF32, Size: "tiny"})
			tokens := file.Value("tokenizer.ggml.tokens").([]string)
			types := file.Value("tokenizer.ggml.token_type").([]int32)
			check := func(toks []string, want int32) {
				for _, s := range toks {
					i := indexOf(tokens, s)
					if i < 0 || types[i] != want {
						t.Errorf("%s: index %d, want a token of type %d", s, i, want)
					}
				}
			}
			check(tt.control, tokenControl)
			check(tt.user, tokenUserDefined)
			for key, tok := range tt.ids {
				if got := file.Value("tokenizer.ggml." + key); got != uint32(indexOf(tokens, tok)) {
					t.Errorf("%s = %v, want %s's id %d", key, got, tok, indexOf(tokens, tok))
				}
			}
			for _, key := range tt.noKeys {
				if file.Value(key) != nil {
					t.Errorf("%s is set", key)
				}
			}
			seen := map[string]bool{}
			for _, tok := range tokens {
				if seen[tok] {
					t.Fatalf("token %q appears twice", tok) // llama.cpp refuses the file
				}
				seen[tok] = true
			}
		})
	}
}

// The tensors each architecture needs, in llama.cpp's shapes: Qwen3's
// per-head norms, heads wider than width over head count.
func TestFamilyTensors(t *testing.T) {
	for _, size := range []string{"tiny", "mid"} {
		for _, f := range Families {
			t.Run(string(f)+"/"+size, func(t *testing.T) {
				opts := Options{Family: f, Weights: WeightsQ4_0, Size: size}
				s, err := opts.shape()
				if err != nil {
					t.Fatal(err)
				}
				file := readModel(t, opts)
				arch := file.Value("general.architecture").(string)
				head := uint64(s.hidden / s.heads)
				if k := file.Value(arch + ".attention.key_length"); k != nil {
					head = uint64(k.(uint32))
				}
				if f != FamilyLlama && head != 64 && head != 128 {
					t.Errorf("head width %d, want the family's own (64 tiny, 128 mid)", head)
				}
				hidden, heads, kv := uint64(s.hidden), uint64(s.heads), uint64(s.kvHeads)
				want := map[string][]uint64{
					"output_norm.weight":       {hidden},
					"blk.0.attn_q.weight":      {hidden, heads * head},
					"blk.0.attn_k.weight":      {hidden, kv * head},
					"blk.0.attn_v.weight":      {hidden, kv * head},
					"blk.0.attn_output.weight": {heads * head, hidden},
					"blk.0.ffn_down.weight":    {uint64(s.ffn), hidden},
				}
				if f == FamilyQwen3 {
					want["blk.1.attn_q_norm.weight"] = []uint64{head}
					want["blk.1.attn_k_norm.weight"] = []uint64{head}
				}
				perBlock := 9
				switch f {
				case FamilyQwen3:
					perBlock = 11
				case FamilyGPTOSS:
					// Experts in place of one network, biases, sinks.
					delete(want, "blk.0.ffn_down.weight")
					ffn, n := uint64(s.expertFFN), uint64(s.experts)
					want["blk.0.ffn_down_exps.weight"] = []uint64{ffn, hidden, n}
					want["blk.0.ffn_gate_exps.bias"] = []uint64{ffn, n}
					want["blk.1.ffn_gate_inp.weight"] = []uint64{hidden, n}
					want["blk.1.attn_sinks.weight"] = []uint64{heads}
					want["blk.1.attn_q.bias"] = []uint64{heads * head}
					perBlock = 19
				}
				for name, shape := range want {
					got, ok := file.Tensor(name)
					if !ok || !slices.Equal(got.Shape, shape) {
						t.Errorf("%s: %v (present %v), want %v", name, got.Shape, ok, shape)
					}
				}
				if got, want := len(file.Tensors), perBlock*s.layers+3; got != want {
					t.Errorf("%d tensors, want %d", got, want)
				}
			})
		}
	}
}

func TestOverrideReplacesAndDeletes(t *testing.T) {
	file := readModel(t, Options{Family: FamilyQwen3, Weights: WeightsF32, Size: "tiny", Override: map[string]any{
		"general.architecture": "nosucharch", "tokenizer.chat_template": nil, "genq.extra": []uint64{1, 2},
	}})
	if got := file.Value("general.architecture"); got != "nosucharch" {
		t.Errorf("architecture %v", got)
	}
	if got := file.Value("tokenizer.chat_template"); got != nil {
		t.Errorf("the deleted template is %q", got)
	}
	if got := file.Value("genq.extra"); !slices.Equal(got.([]uint64), []uint64{1, 2}) {
		t.Errorf("added key %v", got)
	}
}

// The templates are the vendors', byte for byte: their SHA-256 is that of
// llama.cpp v0.5.0's copies in models/templates.
func TestChatTemplatesAreTheVendors(t *testing.T) {
	for name, c := range map[string]struct{ tmpl, sum string }{
		"Qwen-Qwen3-0.6B.jinja":                      {Qwen3ChatTemplate, "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"},
		"mistralai-Mistral-Nemo-Instruct-2407.jinja": {MistralNemoChatTemplate, "e4676cb56dffea7782fd3e2b577cfaf1e123537e6ef49b3ec7caa6c095c62272"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(c.tmpl))); got != c.sum {
			t.Errorf("%s: sha256 %s, want %s", name, got, c.sum)
		}
	}
}

func TestFileNames(t *testing.T) {
	for _, c := range []struct {
		f    Family
		size string
		want string
	}{
		{FamilyLlama, "", "tiny-B.gguf"}, {"", "mid", "mid-B.gguf"},
		{FamilyQwen3, "tiny", "tiny-qwen3-B.gguf"}, {FamilyMistral, "mid", "mid-mistral-B.gguf"},
	} {
		if got := FamilyFileName(c.f, genq.VariantB, c.size); got != c.want {
			t.Errorf("FamilyFileName(%q, B, %q) = %s, want %s", c.f, c.size, got, c.want)
		}
	}
	if FileName(genq.VariantA, "tiny") != "tiny-A.gguf" {
		t.Errorf("FileName(A, tiny) = %s", FileName(genq.VariantA, "tiny"))
	}
}

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
	if err := Write(p, Options{Family: "gemma", Weights: WeightsQ4_0, Size: "tiny"}); err == nil || !strings.Contains(err.Error(), "family") {
		t.Errorf("family gemma: error %v, want one naming the family", err)
	}
	for _, f := range []Family{FamilyQwen3, FamilyMistral} {
		if err := Write(p, Options{Family: f, Weights: WeightsQ4_0, Size: "8b"}); err == nil || !strings.Contains(err.Error(), "tiny and mid") {
			t.Errorf("%s 8b: error %v, want one naming the sizes it has", f, err)
		}
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("a refused model left a file: %v", err)
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

func TestFullVocabularyHasLlama3Ids(t *testing.T) {
	v := llamaVocab(true)
	tokens, types := v.tokens, v.types
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
		if _, err := (randomTensor{seed: 3, name: "w", n: n, std: 1, kind: gguf.TensorF16}).WriteTo(&b); err != nil {
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

// Tekken's unnamed control tokens get zero output rows, so a random model
// seldom writes them; the named ones ([TOOL_CALLS], </s>) and the text
// tokens keep theirs.
func TestMistralQuietsUnnamedControls(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(p, Options{Family: FamilyMistral, Weights: WeightsF32, Size: "tiny"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := f.Tensor("output.weight")
	hidden := int(out.Shape[0])
	row := func(id int) []byte {
		off := int(out.Offset) + 4*hidden*id
		return b[off : off+4*hidden]
	}
	zero := make([]byte, 4*hidden)
	for id := range int(out.Shape[1]) {
		quiet := id >= len(tekkenSpecials) && id < tekkenControls
		if got := bytes.Equal(row(id), zero); got != quiet {
			t.Fatalf("token %d: output row zero %v, want %v", id, got, quiet)
		}
	}
}

func TestRandomTensorZeroRange(t *testing.T) {
	var b bytes.Buffer
	n := chunkWeights + 64
	r := randomTensor{seed: 1, name: "w", n: n, std: 1, kind: gguf.TensorF32, zeroFrom: chunkWeights - 8, zeroTo: chunkWeights + 8}
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b.Bytes()[4*i:]))
		if zero := i >= r.zeroFrom && i < r.zeroTo; (v == 0) != zero {
			t.Fatalf("weight %d is %v; want zero %v", i, v, zero)
		}
	}
}
