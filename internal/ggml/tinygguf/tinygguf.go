package ggml

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/genq/genq/internal/genq"
)

// Weights is how a tiny model stores its matrices.
type Weights string

const (
	WeightsQ4_0 Weights = "q4_0" // variant A: 4-bit
	WeightsF16  Weights = "f16"  // variant B: 16-bit
)

// TinyOptions describe a generated test model.
type TinyOptions struct {
	Weights Weights
	// Size is "tiny" (a few hundred thousand parameters, for tests) or "mid"
	// (about 100M, for benchmarks).
	Size string
	// Seed fixes every weight: the same options write the same bytes.
	Seed int64
}

// TinyOptionsFor returns the options of variant v's test model.
func TinyOptionsFor(v genq.Variant, size string, seed int64) TinyOptions {
	w := WeightsF16
	if v == genq.VariantA {
		w = WeightsQ4_0
	}
	return TinyOptions{Weights: w, Size: size, Seed: seed}
}

// TinyFileName is the name genqctl gives a tiny model of a variant.
func TinyFileName(v genq.Variant, size string) string {
	if size == "" || size == "tiny" {
		return fmt.Sprintf("tiny-%s.gguf", v)
	}
	return fmt.Sprintf("%s-%s.gguf", size, v)
}

type tinyShape struct {
	hidden, layers, heads, kvHeads, ffn int
}

func (o TinyOptions) shape() (tinyShape, error) {
	switch o.Size {
	case "", "tiny":
		// Two heads of 32 with one shared KV head: a 16-wide head (4 heads)
		// made attention, not the scheduler, the cost of a batched step
		// (ggml's F16 GEMM over a 16-long dot and twice the softmax rows):
		// concurrency 4 gave 1.7x of concurrency 1 instead of 2.1x.
		return tinyShape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, ffn: 128}, nil
	case "mid":
		// 14 layers at width 768 with full multi-head attention: about 99M
		// parameters in the blocks, the size class of the 126M llama the
		// performance bar was measured on (whose extra weights are a 32k
		// vocabulary, which costs little per token).
		return tinyShape{hidden: 768, layers: 14, heads: 12, kvHeads: 12, ffn: 2048}, nil
	}
	return tinyShape{}, fmt.Errorf("tiny model size %q: want tiny or mid", o.Size)
}

// Llama3ChatTemplate is Meta's chat template of the Llama 3 instruct models,
// as their tokenizer_config.json carries it.
const Llama3ChatTemplate = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// llama3Specials are Llama 3's special tokens, in their id order.
var llama3Specials = []string{
	"<|begin_of_text|>", "<|end_of_text|>",
	"<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
	"<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
	"<|start_header_id|>", "<|end_header_id|>",
	"<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
}

// tinyMerges are a few byte-pair merges, so the tokenizer really merges
// (Ġ is the byte-level form of a space, Ċ of a newline).
var tinyMerges = [][2]string{
	{"Ċ", "Ċ"}, {"Ġ", "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"},
	{"o", "n"}, {"Ġt", "he"}, {"r", "e"}, {"Ġ", "a"}, {"e", "n"}, {"o", "r"},
	{"Ġ", "s"}, {"Ġ", "w"}, {"Ġ", "h"}, {"s", "t"}, {"a", "t"}, {"Ġ", "i"},
	{"o", "u"}, {"Ġ", "y"}, {"Ġy", "ou"}, {"Ġ", "c"}, {"Ġ", "o"}, {"e", "d"},
}

// byteLevelAlphabet is GPT-2's byte-to-character map: each of the 256 bytes
// gets a printable character, the form byte-level BPE vocabularies store.
func byteLevelAlphabet() []string {
	var keep []int
	for b := '!'; b <= '~'; b++ {
		keep = append(keep, int(b))
	}
	for b := '¡'; b <= '¬'; b++ {
		keep = append(keep, int(b))
	}
	for b := '®'; b <= 'ÿ'; b++ {
		keep = append(keep, int(b))
	}
	isKept := make([]bool, 256)
	for _, b := range keep {
		isKept[b] = true
	}
	alphabet := make([]string, 256)
	next := 256
	for b := range 256 {
		if isKept[b] {
			alphabet[b] = string(rune(b))
		} else {
			alphabet[b] = string(rune(next))
			next++
		}
	}
	return alphabet
}

// tinyVocabulary returns the tokens, their types and the merges.
func tinyVocabulary() (tokens []string, types []int32, merges []string) {
	tokens = byteLevelAlphabet()
	for _, m := range tinyMerges {
		tokens = append(tokens, m[0]+m[1])
		merges = append(merges, m[0]+" "+m[1])
	}
	types = make([]int32, len(tokens))
	for i := range types {
		types[i] = 1 // normal
	}
	for _, s := range llama3Specials {
		tokens = append(tokens, s)
		types = append(types, 3) // control
	}
	return tokens, types, merges
}

// WriteTinyModel writes a small llama-architecture GGUF with random weights,
// a byte-level BPE vocabulary carrying Llama 3's special tokens, and Meta's
// Llama 3 chat template: a stand-in for a real model in tests and benchmarks.
func WriteTinyModel(path string, opts TinyOptions) error {
	return writeTinyModel(path, opts, nil)
}

// writeTinyModel lets tests replace (or, with nil, delete) metadata keys to
// write models the backend must refuse.
func writeTinyModel(path string, opts TinyOptions, override map[string]any) error {
	s, err := opts.shape()
	if err != nil {
		return err
	}
	var fileType uint32
	switch opts.Weights {
	case WeightsQ4_0:
		fileType = 2 // MOSTLY_Q4_0
	case WeightsF16:
		fileType = 1 // MOSTLY_F16
	default:
		return fmt.Errorf("tiny model weights %q: want q4_0 or f16", opts.Weights)
	}

	tokens, types, merges := tinyVocabulary()
	id := func(tok string) uint32 {
		for i, t := range tokens {
			if t == tok {
				return uint32(i)
			}
		}
		panic("tiny vocabulary lacks " + tok)
	}
	headDim := s.hidden / s.heads
	kv := fsggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           fmt.Sprintf("genq-%s-%s", cmp.Or(opts.Size, "tiny"), opts.Weights),
		"general.file_type":                      fileType,
		"llama.block_count":                      uint32(s.layers),
		"llama.context_length":                   uint32(4096),
		"llama.embedding_length":                 uint32(s.hidden),
		"llama.feed_forward_length":              uint32(s.ffn),
		"llama.attention.head_count":             uint32(s.heads),
		"llama.attention.head_count_kv":          uint32(s.kvHeads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.freq_base":                   float32(500000),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.vocab_size":                       uint32(len(tokens)),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "llama-bpe",
		"tokenizer.ggml.tokens":                  tokens,
		"tokenizer.ggml.token_type":              types,
		"tokenizer.ggml.merges":                  merges,
		"tokenizer.ggml.bos_token_id":            id("<|begin_of_text|>"),
		"tokenizer.ggml.eos_token_id":            id("<|eot_id|>"),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.chat_template":                Llama3ChatTemplate,
	}

	vocab := len(tokens)
	kvDim := headDim * s.kvHeads
	var ts []*fsggml.Tensor
	matrix := func(name string, in, out int, std float64) {
		w := randomWeights(opts.Seed, name, in*out, std)
		t := &fsggml.Tensor{Name: name, Shape: []uint64{uint64(in), uint64(out)}}
		switch opts.Weights {
		case WeightsQ4_0:
			t.Kind, t.WriterTo = uint32(fsggml.TensorTypeQ4_0), bytes.NewReader(quantizeQ4_0(w))
		default:
			t.Kind, t.WriterTo = uint32(fsggml.TensorTypeF16), bytes.NewReader(encodeF16(w))
		}
		ts = append(ts, t)
	}
	norm := func(name string) {
		ones := make([]float32, s.hidden)
		for i := range ones {
			ones[i] = 1
		}
		ts = append(ts, &fsggml.Tensor{Name: name, Kind: uint32(fsggml.TensorTypeF32),
			Shape: []uint64{uint64(s.hidden)}, WriterTo: bytes.NewReader(encodeF32(ones))})
	}

	// Scales: unit-variance activations through the blocks, and logits
	// with a spread of a few units, so the next token is not a coin toss
	// between near-equal logits.
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	matrix("token_embd.weight", s.hidden, vocab, 1)
	norm("output_norm.weight")
	matrix("output.weight", s.hidden, vocab, 4*inv(s.hidden))
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		norm(p + "attn_norm.weight")
		norm(p + "ffn_norm.weight")
		matrix(p+"attn_q.weight", s.hidden, s.hidden, inv(s.hidden))
		matrix(p+"attn_k.weight", s.hidden, kvDim, inv(s.hidden))
		matrix(p+"attn_v.weight", s.hidden, kvDim, inv(s.hidden))
		matrix(p+"attn_output.weight", s.hidden, s.hidden, inv(s.hidden)/math.Sqrt(float64(2*s.layers)))
		matrix(p+"ffn_gate.weight", s.hidden, s.ffn, inv(s.hidden))
		matrix(p+"ffn_up.weight", s.hidden, s.ffn, inv(s.hidden))
		matrix(p+"ffn_down.weight", s.ffn, s.hidden, inv(s.ffn)/math.Sqrt(float64(2*s.layers)))
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write tiny model: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tiny-*.gguf")
	if err != nil {
		return fmt.Errorf("write tiny model: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	for k, v := range override {
		if v == nil {
			delete(kv, k)
		} else {
			kv[k] = v
		}
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write tiny model: %w", err)
	}
	if err := fsggml.WriteGGUF(tmp, kv, ts); err != nil {
		tmp.Close()
		return fmt.Errorf("write tiny model %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write tiny model %s: %w", path, err)
	}
	// Rename last, so a reader never sees half a model.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write tiny model: %w", err)
	}
	return nil
}

// randomWeights draws n normal weights from a source fixed by the seed and
// the tensor's name, so each tensor is reproducible on its own.
func randomWeights(seed int64, name string, n int, std float64) []float32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * std)
	}
	return w
}
