// Package tinygguf writes GGUF models with random weights in the shapes and
// metadata of real model families: Llama 3, Qwen3 and Mistral Nemo, each
// with its architecture's tensors, its tokenizer's form of vocabulary, its
// special tokens and its vendor's chat template. Tests and benchmarks run on
// them; their output is noise, they prove the plumbing and the speed.
//
// It is pure Go (no cgo), so commands that only write models do not link
// the engine.
package tinygguf

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
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
	// WeightsQ8_0 and WeightsQ4_K_M are no variant's either: the CPU
	// checks decode every weight type users download on every CPU
	// backend. Q4_K_M is llama-quantize's mix: Q6_K for the output, the
	// values and the down projections, Q4_K for the rest, and Q8_0 for a
	// matrix whose rows are not a multiple of 256 (the tiny models'), where
	// llama-quantize too falls back to a 32-wide type.
	WeightsQ8_0   Weights = "q8_0"
	WeightsQ4_K_M Weights = "q4_k_m"
)

// AllWeights lists the formats Options.Weights accepts.
var AllWeights = []Weights{WeightsQ4_0, WeightsQ8_0, WeightsQ4_K_M, WeightsBF16, WeightsF16, WeightsF32}

// tensorType is the type matrix name, of rows in weights wide, is stored in.
func (w Weights) tensorType(name string, in int) gguf.TensorType {
	switch w {
	case WeightsQ4_0:
		return gguf.TensorQ4_0
	case WeightsQ8_0:
		return gguf.TensorQ8_0
	case WeightsQ4_K_M:
		switch {
		case in%qkK != 0:
			return gguf.TensorQ8_0
		case name == "output.weight", strings.HasSuffix(name, ".attn_v.weight"), strings.HasSuffix(name, ".ffn_down.weight"):
			return gguf.TensorQ6_K
		}
		return gguf.TensorQ4_K
	case WeightsBF16:
		return gguf.TensorBF16
	case WeightsF32:
		return gguf.TensorF32
	}
	return gguf.TensorF16
}

// Family is a model family: its architecture, tokenizer, special tokens,
// chat template and tool-call format.
type Family string

const (
	// FamilyLlama is Llama 3.x: architecture llama, Llama 3's byte-level
	// BPE and special tokens, Meta's template.
	FamilyLlama Family = "llama"
	// FamilyQwen3 is Qwen3: architecture qwen3 (per-head q and k norms,
	// heads wider than the model's width over the head count), Qwen's
	// byte-level BPE and added tokens, and its ChatML template with
	// <tool_call> JSON.
	FamilyQwen3 Family = "qwen3"
	// FamilyMistral is Mistral Nemo: architecture llama with 128-wide heads,
	// the tekken tokenizer with its 1,000 control tokens, and the
	// [INST]/[AVAILABLE_TOOLS]/[TOOL_CALLS] template.
	FamilyMistral Family = "mistral"
	// FamilyGPTOSS is gpt-oss: llama.cpp's gpt-oss architecture (a
	// mixture of experts with biases, attention sinks, every other layer
	// a sliding window), a byte-level BPE with the harmony format's
	// special tokens, and a harmony chat template of genq's own
	// (GPTOSSChatTemplate): reasoning on the analysis channel, the answer
	// on the final one, tool calls on commentary.
	FamilyGPTOSS Family = "gpt-oss"
)

// Families lists the families Options.Family accepts.
var Families = []Family{FamilyLlama, FamilyQwen3, FamilyMistral, FamilyGPTOSS}

// ParseFamily returns the family called s; "" is llama.
func ParseFamily(s string) (Family, error) {
	if s == "" {
		return FamilyLlama, nil
	}
	if f := Family(s); slices.Contains(Families, f) {
		return f, nil
	}
	return "", fmt.Errorf("model family %q: want one of %v", s, Families)
}

// Sizes names the shapes Options.Size accepts, smallest first. Every family
// has tiny and mid; the sizes with Llama 3's vocabulary are llama's only.
var Sizes = []string{"tiny", "small", "tiny-128k", "mid", "mid-128k", "8b", "70b"}

// Options describe a generated model.
type Options struct {
	// Family is the model family; "" is FamilyLlama.
	Family  Family
	Weights Weights
	// Size is one of Sizes: "tiny" (a few hundred thousand parameters, for
	// tests), "small" (a llama whose matrices K-quants can store whole,
	// for the CPU checks), "tiny-128k" (the tiny blocks with Llama 3's 128,256-token
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

// OptionsFor returns the options of variant v's test model (a llama).
func OptionsFor(v genq.Variant, size string, seed int64) Options {
	return Options{Weights: Weights(v.Spec().TestModel), Size: size, Seed: seed}
}

// FileName is the name genqctl gives a generated llama of a variant.
func FileName(v genq.Variant, size string) string {
	return FamilyFileName(FamilyLlama, v, size)
}

// FamilyFileName is the name genqctl gives a generated model of a family
// in a variant's weights: tiny-B.gguf for a llama, tiny-qwen3-B.gguf for
// another family.
func FamilyFileName(f Family, v genq.Variant, size string) string {
	size = cmp.Or(size, "tiny")
	if f == "" || f == FamilyLlama {
		return fmt.Sprintf("%s-%s.gguf", size, v)
	}
	return fmt.Sprintf("%s-%s-%s.gguf", size, f, v)
}

type shape struct {
	hidden, layers, heads, kvHeads, ffn int
	// headDim is each head's width; 0 is hidden/heads. Qwen3 and Mistral
	// Nemo set it apart from that (Nemo: 5120 wide, 32 heads of 128).
	headDim int
	// experts, used and expertFFN are a mixture of experts' count, the
	// experts each token goes through, and each one's width (gpt-oss).
	experts, used, expertFFN int
	// fullVocab pads the vocabulary to Llama 3's 128,256 tokens, with the
	// special tokens at Llama 3's ids: the output layer and the sampler then
	// cost what they cost on the real model.
	fullVocab bool
}

func (s shape) head() int { return cmp.Or(s.headDim, s.hidden/s.heads) }

func (o Options) shape() (shape, error) {
	switch cmp.Or(o.Family, FamilyLlama) {
	case FamilyLlama:
		switch o.Size {
		case "", "tiny":
			// Two heads of 32 with one shared KV head: a 16-wide head (4 heads)
			// made attention, not the scheduler, the cost of a batched step
			// (ggml's F16 GEMM over a 16-long dot and twice the softmax rows):
			// concurrency 4 gave 1.7x of concurrency 1 instead of 2.1x.
			return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, ffn: 128}, nil
		case "tiny-128k":
			return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, ffn: 128, fullVocab: true}, nil
		case "small":
			// Every matrix's rows a multiple of 256, so K-quants store
			// them all (the tiny widths fall back to Q8_0), at a few MB.
			return shape{hidden: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 512}, nil
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
	case FamilyQwen3:
		switch o.Size {
		case "", "tiny":
			// Two heads of 64 over a width of 64, as Qwen3-0.6B has 16 heads
			// of 128 over 1024: the attention is wider than the model.
			return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, headDim: 64, ffn: 128}, nil
		case "mid":
			// Qwen3's heads of 128, two query heads per KV head: about 99M
			// parameters in the blocks, as the llama mid.
			return shape{hidden: 768, layers: 14, heads: 8, kvHeads: 4, headDim: 128, ffn: 2048}, nil
		}
	case FamilyMistral:
		switch o.Size {
		case "", "tiny":
			return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, headDim: 64, ffn: 128}, nil
		case "mid":
			// Nemo's heads of 128, four query heads per KV head: about 94M
			// parameters in the blocks.
			return shape{hidden: 768, layers: 14, heads: 8, kvHeads: 2, headDim: 128, ffn: 2048}, nil
		}
	case FamilyGPTOSS:
		switch o.Size {
		case "", "tiny":
			// gpt-oss-20b's form at a tiny width: heads of 64, eight query
			// heads per KV head there (two here), 32 experts of which 4
			// serve a token there (4 and 2 here).
			return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 1, headDim: 64, ffn: 64, experts: 4, used: 2, expertFFN: 64}, nil
		case "mid":
			return shape{hidden: 768, layers: 14, heads: 8, kvHeads: 2, headDim: 64, ffn: 768, experts: 8, used: 2, expertFFN: 768}, nil
		}
	default:
		return shape{}, fmt.Errorf("model family %q: want one of %v", o.Family, Families)
	}
	if o.Family != "" && o.Family != FamilyLlama && slices.Contains(Sizes, o.Size) {
		return shape{}, fmt.Errorf("model size %q: the %s family has tiny and mid; the larger ones are llama's", o.Size, o.Family)
	}
	return shape{}, fmt.Errorf("model size %q: want one of %v", o.Size, Sizes)
}

// contextLength is every generated model's training context: Llama 3.1's
// 131,072, long enough for a coding agent's prompt, so that the workers,
// tests and benchmarks that leave TEXT_CONTEXT_SIZE unset size their
// context from it, lowered to what memory holds, as they do a real
// model's (the tiny models' cache is 256 bytes a token).
const contextLength = 131072

// model is what a family's file holds, apart from the weights' format.
type model struct {
	meta map[string]any
	// qkNorm adds Qwen3's per-head RMS norms of q and k to each block.
	qkNorm bool
	vocab  int
	// moe gives each block gpt-oss's attention biases and sinks and its
	// experts, in place of one feed-forward network.
	moe bool
	// quietFrom and quietTo are tokens whose output rows are zeros, so the
	// model seldom writes them: tekken's 980 unnamed control tokens, which
	// no real model writes and which would otherwise be most of a tiny
	// vocabulary's draws (and end no answer, nor show in its text).
	quietFrom, quietTo int
}

// build returns the metadata of family f at shape s, and its tensors' plan.
func build(f Family, s shape, name string) model {
	hp := func(arch string, m map[string]any) {
		m["general.architecture"] = arch
		m["general.name"] = name
		m[arch+".block_count"] = uint32(s.layers)
		m[arch+".context_length"] = uint32(contextLength)
		m[arch+".embedding_length"] = uint32(s.hidden)
		m[arch+".feed_forward_length"] = uint32(s.ffn)
		m[arch+".attention.head_count"] = uint32(s.heads)
		m[arch+".attention.head_count_kv"] = uint32(s.kvHeads)
	}
	m := map[string]any{}
	switch f {
	case FamilyQwen3:
		v := qwen3Vocab()
		hp("qwen3", m)
		// The keys Qwen3 GGUFs carry: no rope.dimension_count (it is the
		// head's width), the head's width as key and value lengths.
		m["qwen3.attention.key_length"] = uint32(s.head())
		m["qwen3.attention.value_length"] = uint32(s.head())
		m["qwen3.attention.layer_norm_rms_epsilon"] = float32(1e-6)
		m["qwen3.rope.freq_base"] = float32(1000000)
		m["tokenizer.ggml.model"] = "gpt2"
		m["tokenizer.ggml.pre"] = "qwen2"
		m["tokenizer.ggml.tokens"] = v.tokens
		m["tokenizer.ggml.token_type"] = v.types
		m["tokenizer.ggml.merges"] = v.merges
		// As converted from Qwen3's files: eos is <|im_end|> (the end of a
		// turn), bos and padding <|endoftext|>, and no BOS is added.
		// llama.cpp finds the end-of-turn token by its text.
		m["tokenizer.ggml.eos_token_id"] = v.id("<|im_end|>")
		m["tokenizer.ggml.bos_token_id"] = v.id("<|endoftext|>")
		m["tokenizer.ggml.padding_token_id"] = v.id("<|endoftext|>")
		m["tokenizer.ggml.add_bos_token"] = false
		m["tokenizer.chat_template"] = Qwen3ChatTemplate
		// The output is its own matrix, as in Qwen3-8B and larger: the small
		// Qwen3s tie it to the embeddings, but tied random weights repeat
		// the last token forever (its own embedding stays in the residual).
		return model{meta: m, qkNorm: true, vocab: len(v.tokens)}
	case FamilyMistral:
		v := mistralVocab()
		hp("llama", m)
		m["llama.attention.key_length"] = uint32(s.head())
		m["llama.attention.value_length"] = uint32(s.head())
		m["llama.attention.layer_norm_rms_epsilon"] = float32(1e-5)
		m["llama.rope.freq_base"] = float32(1000000)
		m["llama.rope.dimension_count"] = uint32(s.head())
		m["llama.vocab_size"] = uint32(len(v.tokens))
		m["tokenizer.ggml.model"] = "gpt2"
		m["tokenizer.ggml.pre"] = "tekken"
		m["tokenizer.ggml.tokens"] = v.tokens
		m["tokenizer.ggml.token_type"] = v.types
		m["tokenizer.ggml.merges"] = v.merges
		m["tokenizer.ggml.bos_token_id"] = v.id("<s>")
		m["tokenizer.ggml.eos_token_id"] = v.id("</s>")
		m["tokenizer.ggml.unknown_token_id"] = v.id("<unk>")
		m["tokenizer.ggml.add_bos_token"] = true
		m["tokenizer.ggml.add_eos_token"] = false
		m["tokenizer.chat_template"] = MistralNemoChatTemplate
		return model{meta: m, vocab: len(v.tokens), quietFrom: len(tekkenSpecials), quietTo: tekkenControls}
	case FamilyGPTOSS:
		return gptOSSModel(s, m, hp)
	}
	v := llamaVocab(s.fullVocab)
	hp("llama", m)
	m["llama.attention.layer_norm_rms_epsilon"] = float32(1e-5)
	m["llama.rope.freq_base"] = float32(500000)
	m["llama.rope.dimension_count"] = uint32(s.head())
	m["llama.vocab_size"] = uint32(len(v.tokens))
	m["tokenizer.ggml.model"] = "gpt2"
	m["tokenizer.ggml.pre"] = "llama-bpe"
	m["tokenizer.ggml.tokens"] = v.tokens
	m["tokenizer.ggml.token_type"] = v.types
	m["tokenizer.ggml.merges"] = v.merges
	m["tokenizer.ggml.bos_token_id"] = v.id("<|begin_of_text|>")
	m["tokenizer.ggml.eos_token_id"] = v.id("<|eot_id|>")
	m["tokenizer.ggml.add_bos_token"] = true
	m["tokenizer.chat_template"] = Llama3ChatTemplate
	return model{meta: m, vocab: len(v.tokens)}
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
	switch opts.Weights {
	case WeightsQ4_0:
		fileType = 2 // LLAMA_FTYPE_MOSTLY_Q4_0
	case WeightsQ8_0:
		fileType = 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	case WeightsQ4_K_M:
		fileType = 15 // LLAMA_FTYPE_MOSTLY_Q4_K_M
	case WeightsF16:
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	case WeightsBF16:
		fileType = 32 // LLAMA_FTYPE_MOSTLY_BF16
	case WeightsF32:
		fileType = 0 // LLAMA_FTYPE_ALL_F32
	default:
		return fmt.Errorf("model weights %q: want one of %v", opts.Weights, AllWeights)
	}

	f := cmp.Or(opts.Family, FamilyLlama)
	name := fmt.Sprintf("genq-%s-%s", cmp.Or(opts.Size, "tiny"), opts.Weights)
	if f != FamilyLlama {
		name = fmt.Sprintf("genq-%s-%s-%s", f, cmp.Or(opts.Size, "tiny"), opts.Weights)
	}
	m := build(f, s, name)
	m.meta["general.file_type"] = fileType
	for k, v := range opts.Override {
		if v == nil {
			delete(m.meta, k)
		} else {
			m.meta[k] = v
		}
	}
	// Sorted keys, so the same options write the same bytes.
	meta := make([]gguf.KV, 0, len(m.meta))
	for _, k := range slices.Sorted(maps.Keys(m.meta)) {
		meta = append(meta, gguf.KV{Key: k, Value: m.meta[k]})
	}

	head := s.head()
	qDim, kvDim := head*s.heads, head*s.kvHeads
	var ts []gguf.Tensor
	matrix := func(name string, in, out int, std float64) *randomTensor {
		kind := opts.Weights.tensorType(name, in)
		r := &randomTensor{seed: opts.Seed, name: name, n: in * out, std: std, kind: kind}
		ts = append(ts, gguf.Tensor{Name: name, Type: kind, Shape: []uint64{uint64(in), uint64(out)}, Data: r})
		return r
	}
	norm := func(name string, n int) {
		ts = append(ts, gguf.Tensor{Name: name, Type: gguf.TensorF32,
			Shape: []uint64{uint64(n)}, Data: onesF32(n)})
	}
	// vector is a small F32 tensor of random values (biases, sinks), of
	// any shape.
	vector := func(name string, std float64, dims ...int) {
		n, shape := 1, make([]uint64, len(dims))
		for i, d := range dims {
			n, shape[i] = n*d, uint64(d)
		}
		ts = append(ts, gguf.Tensor{Name: name, Type: gguf.TensorF32, Shape: shape,
			Data: &randomTensor{seed: opts.Seed, name: name, n: n, std: std, kind: gguf.TensorF32}})
	}
	// experts is a stack of matrices, one per expert.
	experts := func(name string, in, out int, std float64) {
		kind := opts.Weights.tensorType(name, in)
		r := &randomTensor{seed: opts.Seed, name: name, n: in * out * s.experts, std: std, kind: kind}
		ts = append(ts, gguf.Tensor{Name: name, Type: kind, Shape: []uint64{uint64(in), uint64(out), uint64(s.experts)}, Data: r})
	}

	// Scales: unit-variance activations through the blocks, and logits
	// with a spread of a few units, so the next token is not a coin toss
	// between near-equal logits.
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	matrix("token_embd.weight", s.hidden, m.vocab, 1)
	out := matrix("output.weight", s.hidden, m.vocab, 4*inv(s.hidden))
	out.zeroFrom, out.zeroTo = m.quietFrom*s.hidden, m.quietTo*s.hidden
	norm("output_norm.weight", s.hidden)
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		norm(p+"attn_norm.weight", s.hidden)
		if m.moe {
			gptOSSBlock(p, s, matrix, norm, vector, experts)
			continue
		}
		norm(p+"ffn_norm.weight", s.hidden)
		if m.qkNorm {
			norm(p+"attn_q_norm.weight", head)
			norm(p+"attn_k_norm.weight", head)
		}
		matrix(p+"attn_q.weight", s.hidden, qDim, inv(s.hidden))
		matrix(p+"attn_k.weight", s.hidden, kvDim, inv(s.hidden))
		matrix(p+"attn_v.weight", s.hidden, kvDim, inv(s.hidden))
		matrix(p+"attn_output.weight", qDim, s.hidden, inv(qDim)/math.Sqrt(float64(2*s.layers)))
		matrix(p+"ffn_gate.weight", s.hidden, s.ffn, inv(s.hidden))
		matrix(p+"ffn_up.weight", s.hidden, s.ffn, inv(s.hidden))
		matrix(p+"ffn_down.weight", s.ffn, s.hidden, inv(s.ffn)/math.Sqrt(float64(2*s.layers)))
	}
	// Block by block, each by name, then the model-wide tensors: the order
	// ollama's writer gave them before this package wrote GGUF itself, so
	// a llama's bytes did not change.
	slices.SortStableFunc(ts, func(a, b gguf.Tensor) int {
		return cmp.Or(cmp.Compare(block(a.Name), block(b.Name)), strings.Compare(a.Name, b.Name))
	})

	return writeModel(path, meta, ts)
}

// writeModel writes a model whole or not at all.
func writeModel(path string, meta []gguf.KV, ts []gguf.Tensor) error {
	if err := gguf.WriteFile(path, meta, ts); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

// block is the block a tensor belongs to; the model-wide ones sort last.
func block(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return math.MaxInt
	}
	n, _, _ := strings.Cut(rest, ".")
	b, err := strconv.Atoi(n)
	if err != nil {
		return math.MaxInt
	}
	return b
}
