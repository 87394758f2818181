package tinygguf

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/genq/genq/internal/gguf"
)

// FamilyBERT is a BERT-family embedding model (MiniLM, bge): llama.cpp's
// bert architecture, with token, position and token-type embeddings, post
// layer norms with biases, a GELU feed-forward network, a WordPiece
// vocabulary and mean pooling. It is no chat family: WriteBERT writes it.
const FamilyBERT Family = "bert"

// BERTSizes are the shapes WriteBERT accepts: tiny (tests) and mini
// (all-MiniLM-L6-v2's blocks: 6 layers at width 384, for benchmarks).
var BERTSizes = []string{"tiny", "mini"}

// BERTContext is the generated embedding models' trained context, BERT's
// 512 positions: an input longer than it is refused (or cut) by whoever
// serves it, and the position table is that long.
const BERTContext = 512

// BERTFileName is the name genqctl gives a generated embedding model.
func BERTFileName(size string) string {
	return fmt.Sprintf("%s-bert.gguf", cmp.Or(size, "tiny"))
}

func bertShape(size string) (shape, error) {
	switch size {
	case "", "tiny":
		return shape{hidden: 64, layers: 2, heads: 2, kvHeads: 2, ffn: 128}, nil
	case "mini":
		return shape{hidden: 384, layers: 6, heads: 12, kvHeads: 12, ffn: 1536}, nil
	}
	return shape{}, fmt.Errorf("embedding model size %q: want one of %v", size, BERTSizes)
}

// bertVocab is a WordPiece vocabulary in the form llama.cpp's converter
// writes it: BERT's special tokens first, then word starts with a leading
// "▁" (the converter's stand-in for a word boundary) and word pieces
// without it (BERT's "##"). Every printable ASCII character is both, so any
// ASCII text tokenizes without [UNK]; a few common words and suffixes make
// the tokenizer pick longest matches.
func bertVocab() vocab {
	var v vocab
	v.add(tokenControl, "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
	for c := '!'; c <= '~'; c++ {
		if c >= 'A' && c <= 'Z' {
			continue // the tokenizer lowercases first (an uncased model)
		}
		v.add(tokenNormal, "▁"+string(c), string(c))
	}
	for _, w := range bertWords {
		v.add(tokenNormal, "▁"+w)
	}
	for _, s := range []string{"ing", "ed", "er", "ly", "es", "ion", "s"} {
		if !slices.Contains(v.tokens, s) {
			v.add(tokenNormal, s)
		}
	}
	return v
}

var bertWords = []string{"the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as",
	"was", "this", "are", "be", "by", "at", "from", "or", "an", "not", "what", "all", "were", "we", "when",
	"your", "can", "said", "there", "use", "each", "which", "she", "do", "how", "their", "if", "will", "up",
	"other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would", "make", "like",
	"him", "into", "time", "has", "look", "two", "more", "write", "go", "see", "number", "no", "way", "could",
	"people", "my", "than", "first", "water", "been", "call", "who", "oil", "its", "now", "find", "long",
	"down", "day", "did", "get", "come", "made", "may", "part", "hello", "world", "cat", "dog", "model",
	"queue", "vector", "search", "text", "embedding", "document", "query", "question", "answer"}

// WriteBERT writes a BERT-family embedding model of size (BERTSizes) with
// random weights to path, in weights (f16 when empty, or f32). Like Write,
// the file appears whole or not at all, and the same options write the
// same bytes.
func WriteBERT(path, size string, weights Weights, seed int64) error {
	s, err := bertShape(size)
	if err != nil {
		return err
	}
	weights = cmp.Or(weights, WeightsF16)
	var fileType uint32
	switch weights {
	case WeightsF16:
		fileType = 1
	case WeightsF32:
		fileType = 0
	default:
		return fmt.Errorf("embedding model weights %q: want f16 or f32", weights)
	}
	v := bertVocab()
	meta := bertMeta(s, v, fmt.Sprintf("genq-bert-%s-%s", cmp.Or(size, "tiny"), weights), fileType)
	ts := bertTensors(s, len(v.tokens), weights, seed)
	return writeModel(path, meta, ts)
}

// bertMeta is the metadata llama.cpp's converter writes for a BERT model.
func bertMeta(s shape, v vocab, name string, fileType uint32) []gguf.KV {
	m := map[string]any{
		"general.architecture":              "bert",
		"general.name":                      name,
		"general.file_type":                 fileType,
		"bert.block_count":                  uint32(s.layers),
		"bert.context_length":               uint32(BERTContext),
		"bert.embedding_length":             uint32(s.hidden),
		"bert.feed_forward_length":          uint32(s.ffn),
		"bert.attention.head_count":         uint32(s.heads),
		"bert.attention.layer_norm_epsilon": float32(1e-12),
		"bert.attention.causal":             false,
		"bert.pooling_type":                 uint32(1), // LLAMA_POOLING_TYPE_MEAN, as MiniLM's
		"tokenizer.ggml.model":              "bert",
		"tokenizer.ggml.pre":                "default",
		"tokenizer.ggml.tokens":             v.tokens,
		"tokenizer.ggml.token_type":         v.types,
		"tokenizer.ggml.token_type_count":   uint32(2),
		"tokenizer.ggml.padding_token_id":   v.id("[PAD]"),
		"tokenizer.ggml.unknown_token_id":   v.id("[UNK]"),
		"tokenizer.ggml.bos_token_id":       v.id("[CLS]"),
		"tokenizer.ggml.cls_token_id":       v.id("[CLS]"),
		"tokenizer.ggml.seperator_token_id": v.id("[SEP]"), // llama.cpp's spelling
		"tokenizer.ggml.mask_token_id":      v.id("[MASK]"),
	}
	meta := make([]gguf.KV, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		meta = append(meta, gguf.KV{Key: k, Value: m[k]})
	}
	return meta
}

// bertTensors plans a BERT model's tensors: the embeddings and their norm,
// then per block q, k, v and the attention's output with biases, its norm,
// the feed-forward network with biases and the block's output norm.
func bertTensors(s shape, vocabSize int, weights Weights, seed int64) []gguf.Tensor {
	var ts []gguf.Tensor
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	matrix := func(name string, in, out int, std float64) {
		kind := weights.tensorType(name, in)
		ts = append(ts, gguf.Tensor{Name: name, Type: kind, Shape: []uint64{uint64(in), uint64(out)},
			Data: &randomTensor{seed: seed, name: name, n: in * out, std: std, kind: kind}})
	}
	// vector is an F32 tensor: a norm's gain (ones) or a bias (small
	// random values, so that biases are really added).
	vector := func(name string, n int, ones bool) {
		t := gguf.Tensor{Name: name, Type: gguf.TensorF32, Shape: []uint64{uint64(n)}}
		if ones {
			t.Data = onesF32(n)
		} else {
			t.Data = &randomTensor{seed: seed, name: name, n: n, std: 0.02, kind: gguf.TensorF32}
		}
		ts = append(ts, t)
	}
	matrix("token_embd.weight", s.hidden, vocabSize, 1)
	matrix("position_embd.weight", s.hidden, BERTContext, 0.5)
	// The token types stay F32, as converters keep them: the graph adds
	// their row to F32 activations directly, which ggml cannot do from F16.
	ts = append(ts, gguf.Tensor{Name: "token_types.weight", Type: gguf.TensorF32, Shape: []uint64{uint64(s.hidden), 2},
		Data: &randomTensor{seed: seed, name: "token_types.weight", n: 2 * s.hidden, std: 0.5, kind: gguf.TensorF32}})
	vector("token_embd_norm.weight", s.hidden, true)
	vector("token_embd_norm.bias", s.hidden, false)
	for l := range s.layers {
		p := fmt.Sprintf("blk.%d.", l)
		for _, m := range []string{"attn_q", "attn_k", "attn_v"} {
			matrix(p+m+".weight", s.hidden, s.hidden, inv(s.hidden))
			vector(p+m+".bias", s.hidden, false)
		}
		matrix(p+"attn_output.weight", s.hidden, s.hidden, inv(s.hidden))
		vector(p+"attn_output.bias", s.hidden, false)
		vector(p+"attn_output_norm.weight", s.hidden, true)
		vector(p+"attn_output_norm.bias", s.hidden, false)
		matrix(p+"ffn_up.weight", s.hidden, s.ffn, inv(s.hidden))
		vector(p+"ffn_up.bias", s.ffn, false)
		matrix(p+"ffn_down.weight", s.ffn, s.hidden, inv(s.ffn))
		vector(p+"ffn_down.bias", s.hidden, false)
		vector(p+"layer_output_norm.weight", s.hidden, true)
		vector(p+"layer_output_norm.bias", s.hidden, false)
	}
	return ts
}
