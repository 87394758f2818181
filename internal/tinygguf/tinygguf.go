// Package tinygguf writes llama-architecture GGUF models with random
// weights: real format, real shapes, a byte-level BPE vocabulary carrying
// Llama 3's special tokens and Meta's chat template. Tests and benchmarks run
// on them; their output is noise, they prove the plumbing and the speed.
//
// It is pure Go (no cgo), so commands that only write models do not link
// the engine.
package tinygguf

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/x448/float16"

	"github.com/genq/genq/internal/genq"
)

// Weights is how a model stores its matrices.
type Weights string

const (
	WeightsQ4_0 Weights = "q4_0" // variant A: 4-bit
	WeightsF16  Weights = "f16"  // 16-bit IEEE half
	// WeightsBF16 is variant B's: its hub model is Llama 3.1's own BF16
	// release, and bfloat16 is what the real weights are trained in.
	WeightsBF16 Weights = "bf16"
	// WeightsF32 is no variant's format: CPU comparisons with peers whose
	// figures were taken on F32 files use it.
	WeightsF32 Weights = "f32"
)

// Sizes names the shapes Options.Size accepts, smallest first.
var Sizes = []string{"tiny", "tiny-128k", "mid", "mid-128k", "8b", "70b"}

// Options describe a generated model.
type Options struct {
	Weights Weights
	// Size is one of Sizes: "tiny" (a few hundred thousand parameters, for
	// tests), "tiny-128k" (the tiny blocks with Llama 3's 128,256-token
	// vocabulary, for benchmarks of the host's work per step, which grows
	// with the vocabulary, not the model), "mid" (about 100M, for CPU
	// benchmarks), "mid-128k" (its blocks with Llama 3's vocabulary, for
	// CPU benchmarks of work that grows with the vocabulary, such as
	// structured output's masks), or "8b" and "70b"
	// (Llama 3's shapes and its 128,256-token vocabulary, for GPU
	// benchmarks: 16 GB in BF16, 40 GB in Q4_0).
	Size string
	// Seed fixes every weight: the same options write the same bytes.
	Seed int64
	// Override replaces metadata keys, or deletes them when the value is
	// nil, so tests can write models a backend must refuse.
	Override map[string]any
}

// OptionsFor returns the options of variant v's test model.
func OptionsFor(v genq.Variant, size string, seed int64) Options {
	return Options{Weights: Weights(v.Spec().TestModel), Size: size, Seed: seed}
}

// FileName is the name genqctl gives a generated model of a variant.
func FileName(v genq.Variant, size string) string {
	if size == "" || size == "tiny" {
		return fmt.Sprintf("tiny-%s.gguf", v)
	}
	return fmt.Sprintf("%s-%s.gguf", size, v)
}

type shape struct {
	hidden, layers, heads, kvHeads, ffn int
	// fullVocab pads the vocabulary to Llama 3's 128,256 tokens, with the
	// special tokens at Llama 3's ids: the output layer and the sampler then
	// cost what they cost on the real model.
	fullVocab bool
}

func (o Options) shape() (shape, error) {
	switch o.Size {
	case "", "tiny":
		// Two heads of 32 with one shared KV head: a 16-wide head (4 heads)
		// made attention, not the scheduler, the cost of a batched step
		// (ggml's F16 GEMM over a 16-long dot and twice the softmax rows):
		// concurrency 4 gave 1.7x of concurrency 1 instead of 2.1x.
		return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, ffn: 128}, nil
	case "tiny-128k":
		return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, ffn: 128, fullVocab: true}, nil
	case "mid":
		// 14 layers at width 768 with full multi-head attention: about 99M
		// parameters in the blocks, the size class of the 126M llama the
		// CPU performance bar was measured on (whose extra weights are a
		// 32k vocabulary, which costs little per token).
		return shape{hidden: 768, layers: 14, heads: 12, kvHeads: 12, ffn: 2048}, nil
	case "mid-128k":
		return shape{hidden: 768, layers: 14, heads: 12, kvHeads: 12, ffn: 2048, fullVocab: true}, nil
	case "8b":
		return shape{hidden: 4096, layers: 32, heads: 32, kvHeads: 8, ffn: 14336, fullVocab: true}, nil
	case "70b":
		return shape{hidden: 8192, layers: 80, heads: 64, kvHeads: 8, ffn: 28672, fullVocab: true}, nil
	}
	return shape{}, fmt.Errorf("model size %q: want one of %v", o.Size, Sizes)
}

// Llama3ChatTemplate is Meta's chat template of the Llama 3 instruct models,
// as their tokenizer_config.json carries it.
const Llama3ChatTemplate = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// Llama3Specials are Llama 3's first special tokens, in their id order.
func Llama3Specials() []string {
	return []string{
		"<|begin_of_text|>", "<|end_of_text|>",
		"<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
		"<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
		"<|start_header_id|>", "<|end_header_id|>",
		"<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
	}
}

// Llama 3's vocabulary: 128,000 regular tokens, then 256 special ones.
const (
	llama3Regular = 128000
	llama3Vocab   = 128256
)

// tinyMerges are a few byte-pair merges, so the tokenizer really merges
// (Ġ is the byte-level form of a space, Ċ of a newline).
var tinyMerges = [][2]string{
	{"Ċ", "Ċ"}, {"Ġ", "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"},
	{"o", "n"}, {"Ġt", "he"}, {"r", "e"}, {"Ġ", "a"}, {"e", "n"}, {"o", "r"},
	{"Ġ", "s"}, {"Ġ", "w"}, {"Ġ", "h"}, {"s", "t"}, {"a", "t"}, {"Ġ", "i"},
	{"o", "u"}, {"Ġ", "y"}, {"Ġy", "ou"}, {"Ġ", "c"}, {"Ġ", "o"}, {"e", "d"},
}

// ByteLevelAlphabet is GPT-2's byte-to-character map: each of the 256 bytes
// gets a printable character, the form byte-level BPE vocabularies store.
func ByteLevelAlphabet() []string {
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

// Token types as GGUF stores them.
const (
	tokenNormal  = 1
	tokenControl = 3
	tokenUnused  = 5
)

// vocabulary returns the tokens, their types and the merges. The full one
// pads the regular range with unused tokens no merge can produce, and puts
// the special tokens at Llama 3's ids (begin_of_text = 128000).
func vocabulary(full bool) (tokens []string, types []int32, merges []string) {
	tokens = ByteLevelAlphabet()
	for _, m := range tinyMerges {
		tokens = append(tokens, m[0]+m[1])
		merges = append(merges, m[0]+" "+m[1])
	}
	types = make([]int32, len(tokens))
	for i := range types {
		types[i] = tokenNormal
	}
	if full {
		for i := len(tokens); i < llama3Regular; i++ {
			tokens = append(tokens, fmt.Sprintf("<|genq_pad_%d|>", i))
			types = append(types, tokenUnused)
		}
	}
	specials := Llama3Specials()
	if full {
		for i := len(specials); i < llama3Vocab-llama3Regular; i++ {
			specials = append(specials, fmt.Sprintf("<|reserved_special_token_%d|>", i-8))
		}
	}
	for _, s := range specials {
		tokens = append(tokens, s)
		types = append(types, tokenControl)
	}
	return tokens, types, merges
}

// Write writes a model with opts to path. Tensors are generated and written
// in parallel, a chunk at a time, so memory stays small however large the
// model: an 8B one needs no 16 GB buffer. The file appears whole or not at
// all.
func Write(path string, opts Options) error {
	s, err := opts.shape()
	if err != nil {
		return err
	}
	var fileType uint32
	var matrixKind fsggml.TensorType
	switch opts.Weights {
	case WeightsQ4_0:
		fileType, matrixKind = 2, fsggml.TensorTypeQ4_0 // MOSTLY_Q4_0
	case WeightsF16:
		fileType, matrixKind = 1, fsggml.TensorTypeF16 // MOSTLY_F16
	case WeightsBF16:
		fileType, matrixKind = uint32(fsggml.FileTypeBF16), fsggml.TensorTypeBF16
	case WeightsF32:
		fileType, matrixKind = 0, fsggml.TensorTypeF32 // ALL_F32
	default:
		return fmt.Errorf("model weights %q: want q4_0, f16, bf16 or f32", opts.Weights)
	}

	tokens, types, merges := vocabulary(s.fullVocab)
	id := func(tok string) uint32 {
		i := slices.Index(tokens, tok)
		if i < 0 {
			panic("vocabulary lacks " + tok)
		}
		return uint32(i)
	}
	headDim := s.hidden / s.heads
	kv := fsggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           fmt.Sprintf("genq-%s-%s", cmp.Or(opts.Size, "tiny"), opts.Weights),
		"general.file_type":                      fileType,
		"llama.block_count":                      uint32(s.layers),
		"llama.context_length":                   uint32(8192),
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
	for k, v := range opts.Override {
		if v == nil {
			delete(kv, k)
		} else {
			kv[k] = v
		}
	}

	vocab := len(tokens)
	kvDim := headDim * s.kvHeads
	var ts []*fsggml.Tensor
	matrix := func(name string, in, out int, std float64) {
		ts = append(ts, &fsggml.Tensor{Name: name, Kind: uint32(matrixKind),
			Shape:    []uint64{uint64(in), uint64(out)},
			WriterTo: randomTensor{seed: opts.Seed, name: name, n: in * out, std: std, kind: matrixKind}})
	}
	norm := func(name string) {
		ts = append(ts, &fsggml.Tensor{Name: name, Kind: uint32(fsggml.TensorTypeF32),
			Shape:    []uint64{uint64(s.hidden)},
			WriterTo: onesF32(s.hidden)})
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
		return fmt.Errorf("write model: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tiny-*.gguf")
	if err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write model: %w", err)
	}
	// WriteGGUF writes the tensors in parallel, each through its WriterTo.
	if err := fsggml.WriteGGUF(tmp, kv, ts); err != nil {
		tmp.Close()
		return fmt.Errorf("write model %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write model %s: %w", path, err)
	}
	// Rename last, so a reader never sees half a model.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

// chunkWeights is how many weights a randomTensor draws and encodes at a
// time: a multiple of the Q4_0 block, small enough that one writer per core
// holds a few MB.
const chunkWeights = 1 << 20

// randomTensor generates a tensor's normal weights as it writes them. Each
// chunk has its own source, fixed by the seed, the tensor's name and the
// chunk's index, so the bytes do not depend on how writers are scheduled.
type randomTensor struct {
	seed int64
	name string
	n    int
	std  float64
	kind fsggml.TensorType
}

func (r randomTensor) WriteTo(w io.Writer) (int64, error) {
	h := fnv.New64a()
	h.Write([]byte(r.name))
	stream := h.Sum64()
	x := make([]float32, 0, chunkWeights)
	var out []byte
	var written int64
	for start, chunk := 0, uint64(0); start < r.n; start, chunk = start+chunkWeights, chunk+1 {
		rng := rand.New(rand.NewPCG(uint64(r.seed)^chunk*0x9e3779b97f4a7c15, stream))
		x = x[:min(chunkWeights, r.n-start)]
		for i := range x {
			x[i] = float32(rng.NormFloat64() * r.std)
		}
		switch r.kind {
		case fsggml.TensorTypeQ4_0:
			out = appendQ4_0(out[:0], x)
		case fsggml.TensorTypeF32:
			out = appendF32(out[:0], x)
		case fsggml.TensorTypeBF16:
			out = appendBF16(out[:0], x)
		default:
			out = appendF16(out[:0], x)
		}
		n, err := w.Write(out)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// onesF32 is a norm's weights: n float32 ones.
type onesF32 int

func (n onesF32) WriteTo(w io.Writer) (int64, error) {
	b := make([]byte, 0, 4*int(n))
	for range int(n) {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(1))
	}
	k, err := w.Write(b)
	return int64(k), err
}

func appendF32(out []byte, x []float32) []byte {
	for _, v := range x {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// appendBF16 rounds each weight to the nearest bfloat16, ties to even (the
// upper half of its float32 bits), as converters from training checkpoints do.
func appendBF16(out []byte, x []float32) []byte {
	for _, v := range x {
		b := math.Float32bits(v)
		b += 0x7fff + (b>>16)&1
		out = binary.LittleEndian.AppendUint16(out, uint16(b>>16))
	}
	return out
}

func appendF16(out []byte, x []float32) []byte {
	for _, v := range x {
		out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
	}
	return out
}
