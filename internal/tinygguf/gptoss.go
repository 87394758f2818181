package tinygguf

import (
	"math"
)

// harmonySpecials are the special tokens of gpt-oss's o200k_harmony
// vocabulary that the harmony format writes, in id order (199,998 on in
// the real one, where reserved tokens sit between some of them; a tiny
// vocabulary leaves those out). llama.cpp gives <|channel|>, <|message|>,
// <|start|>, <|constrain|> and <|end|> their text in an answer, and ends
// an answer at <|return|> or <|call|>.
var harmonySpecials = []string{
	"<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
	"<|start|>", "<|end|>", "<|message|>", "<|call|>",
}

// gptOSSVocab is a byte-level BPE with the harmony special tokens as
// control tokens after the bytes and merges.
func gptOSSVocab() vocab {
	var v vocab
	v.add(tokenNormal, ByteLevelAlphabet()...)
	v.addMerges()
	v.add(tokenControl, harmonySpecials...)
	return v
}

// gptOSSModel is the metadata of a gpt-oss model at shape s: the keys
// llama.cpp's gpt-oss loader requires (the experts, the sliding window),
// and the tokenizer as converted from openai/gpt-oss-20b (eos
// <|return|>, no BOS added).
func gptOSSModel(s shape, m map[string]any, hp func(string, map[string]any)) model {
	const arch = "gpt-oss"
	v := gptOSSVocab()
	hp(arch, m)
	m[arch+".attention.key_length"] = uint32(s.head())
	m[arch+".attention.value_length"] = uint32(s.head())
	m[arch+".attention.layer_norm_rms_epsilon"] = float32(1e-5)
	m[arch+".attention.sliding_window"] = uint32(128)
	m[arch+".rope.freq_base"] = float32(150000)
	m[arch+".expert_count"] = uint32(s.experts)
	m[arch+".expert_used_count"] = uint32(s.used)
	m[arch+".expert_feed_forward_length"] = uint32(s.expertFFN)
	m["tokenizer.ggml.model"] = "gpt2"
	m["tokenizer.ggml.pre"] = "gpt-4o"
	m["tokenizer.ggml.tokens"] = v.tokens
	m["tokenizer.ggml.token_type"] = v.types
	m["tokenizer.ggml.merges"] = v.merges
	m["tokenizer.ggml.bos_token_id"] = v.id("<|startoftext|>")
	m["tokenizer.ggml.eos_token_id"] = v.id("<|return|>")
	m["tokenizer.ggml.padding_token_id"] = v.id("<|endoftext|>")
	m["tokenizer.ggml.add_bos_token"] = false
	m["tokenizer.chat_template"] = GPTOSSChatTemplate
	return model{meta: m, moe: true, vocab: len(v.tokens)}
}

// gptOSSBlock adds the tensors of gpt-oss block p after its attention
// norm: biased projections, a sink per head, the norm after attention,
// the router and the experts, each with its bias.
func gptOSSBlock(p string, s shape, matrix func(string, int, int, float64) *randomTensor, norm func(string, int),
	vector func(string, float64, ...int), experts func(string, int, int, float64)) {
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	head := s.head()
	qDim, kvDim := head*s.heads, head*s.kvHeads
	norm(p+"post_attention_norm.weight", s.hidden)
	matrix(p+"attn_q.weight", s.hidden, qDim, inv(s.hidden))
	matrix(p+"attn_k.weight", s.hidden, kvDim, inv(s.hidden))
	matrix(p+"attn_v.weight", s.hidden, kvDim, inv(s.hidden))
	matrix(p+"attn_output.weight", qDim, s.hidden, inv(qDim)/math.Sqrt(float64(2*s.layers)))
	const bias = 0.02
	vector(p+"attn_q.bias", bias, qDim)
	vector(p+"attn_k.bias", bias, kvDim)
	vector(p+"attn_v.bias", bias, kvDim)
	vector(p+"attn_output.bias", bias, s.hidden)
	vector(p+"attn_sinks.weight", 1, s.heads)
	matrix(p+"ffn_gate_inp.weight", s.hidden, s.experts, inv(s.hidden))
	vector(p+"ffn_gate_inp.bias", bias, s.experts)
	experts(p+"ffn_gate_exps.weight", s.hidden, s.expertFFN, inv(s.hidden))
	experts(p+"ffn_up_exps.weight", s.hidden, s.expertFFN, inv(s.hidden))
	experts(p+"ffn_down_exps.weight", s.expertFFN, s.hidden, inv(s.expertFFN)/math.Sqrt(float64(2*s.layers)))
	vector(p+"ffn_gate_exps.bias", bias, s.expertFFN, s.experts)
	vector(p+"ffn_up_exps.bias", bias, s.expertFFN, s.experts)
	vector(p+"ffn_down_exps.bias", bias, s.hidden, s.experts)
}
