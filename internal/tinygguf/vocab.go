package tinygguf

import (
	"fmt"
	"slices"
)

// Token types as GGUF stores them (llama.cpp's llama_token_type).
const (
	tokenNormal  = 1
	tokenControl = 3
	// tokenUserDefined is an added token that is not a control token: the
	// tokenizer matches it in any text, and detokenizing keeps it.
	tokenUserDefined = 4
	tokenUnused      = 5
)

// vocab is a tokenizer's tokens, their types and its merges.
type vocab struct {
	tokens []string
	types  []int32
	merges []string
}

func (v *vocab) add(typ int32, tokens ...string) {
	for _, t := range tokens {
		v.tokens = append(v.tokens, t)
		v.types = append(v.types, typ)
	}
}

// addMerges adds tinyMerges: each merged pair becomes a token.
func (v *vocab) addMerges() {
	for _, m := range tinyMerges {
		v.add(tokenNormal, m[0]+m[1])
		v.merges = append(v.merges, m[0]+" "+m[1])
	}
}

// id is tok's id. Every family's metadata names tokens its vocabulary has,
// so a missing one is a bug here, not bad input.
func (v *vocab) id(tok string) uint32 {
	i := slices.Index(v.tokens, tok)
	if i < 0 {
		panic("tinygguf: the vocabulary lacks " + tok)
	}
	return uint32(i)
}

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

// llamaVocab is Llama 3's shape of vocabulary: the bytes at ids 0 to 255,
// the merges, then the special tokens as control tokens. The full one pads
// the regular range with unused tokens no merge can produce, and puts the
// special tokens at Llama 3's ids (begin_of_text = 128000).
func llamaVocab(full bool) vocab {
	var v vocab
	v.add(tokenNormal, ByteLevelAlphabet()...)
	v.addMerges()
	if full {
		for i := len(v.tokens); i < llama3Regular; i++ {
			v.add(tokenUnused, fmt.Sprintf("<|genq_pad_%d|>", i))
		}
	}
	specials := Llama3Specials()
	if full {
		for i := len(specials); i < llama3Vocab-llama3Regular; i++ {
			specials = append(specials, fmt.Sprintf("<|reserved_special_token_%d|>", i-8))
		}
	}
	v.add(tokenControl, specials...)
	return v
}

// qwen3Added are the tokens Qwen3 adds after its regular ones (at 151,643
// on), in id order, with the types llama.cpp's converter gives them: a
// control token where Qwen's tokenizer_config.json marks it special or it
// looks special (<|...|>), user-defined otherwise. So <tool_call> and
// <think> are text the tokenizer always matches, and detokenizing keeps.
var qwen3Added = []struct {
	text string
	typ  int32
}{
	{"<|endoftext|>", tokenControl}, {"<|im_start|>", tokenControl}, {"<|im_end|>", tokenControl},
	{"<|object_ref_start|>", tokenControl}, {"<|object_ref_end|>", tokenControl},
	{"<|box_start|>", tokenControl}, {"<|box_end|>", tokenControl},
	{"<|quad_start|>", tokenControl}, {"<|quad_end|>", tokenControl},
	{"<|vision_start|>", tokenControl}, {"<|vision_end|>", tokenControl},
	{"<|vision_pad|>", tokenControl}, {"<|image_pad|>", tokenControl}, {"<|video_pad|>", tokenControl},
	{"<tool_call>", tokenUserDefined}, {"</tool_call>", tokenUserDefined},
	{"<|fim_prefix|>", tokenControl}, {"<|fim_middle|>", tokenControl}, {"<|fim_suffix|>", tokenControl},
	{"<|fim_pad|>", tokenControl}, {"<|repo_name|>", tokenControl}, {"<|file_sep|>", tokenControl},
	{"<tool_response>", tokenUserDefined}, {"</tool_response>", tokenUserDefined},
	{"<think>", tokenUserDefined}, {"</think>", tokenUserDefined},
}

// qwen3Vocab is Qwen's shape of vocabulary: the bytes first in GPT-2's
// order (id 0 is "!", as in Qwen's own), the merges, then Qwen3's added
// tokens.
func qwen3Vocab() vocab {
	var v vocab
	bytes := ByteLevelAlphabet()
	slices.SortFunc(bytes, func(a, b string) int { return int([]rune(a)[0]) - int([]rune(b)[0]) })
	v.add(tokenNormal, bytes...)
	v.addMerges()
	for _, t := range qwen3Added {
		v.add(t.typ, t.text)
	}
	return v
}

// tekkenSpecials are the named control tokens at the start of Mistral's
// tekken vocabularies (ids 0 to 19, as mistral-common numbers them); ids 20
// to 999 are <SPECIAL_n>.
var tekkenSpecials = []string{
	"<unk>", "<s>", "</s>", "[INST]", "[/INST]",
	"[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]",
	"[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]",
	"[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
}

// tekkenControls is how many ids tekken reserves for control tokens.
const tekkenControls = 1000

// mistralVocab is tekken's shape of vocabulary: 1,000 control tokens, then
// the bytes in byte order (tekken's first ranks), then the merges.
func mistralVocab() vocab {
	var v vocab
	v.add(tokenControl, tekkenSpecials...)
	for i := len(tekkenSpecials); i < tekkenControls; i++ {
		v.add(tokenControl, fmt.Sprintf("<SPECIAL_%d>", i))
	}
	v.add(tokenNormal, ByteLevelAlphabet()...)
	v.addMerges()
	return v
}
