package openai

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
)

// chatLogprobs are a chat choice's log-probabilities: an entry per token of
// the content. genq never refuses in the model's voice, so refusal stays
// null.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal []chatLogprob `json:"refusal"`
}

type chatLogprob struct {
	genq.Logprob
	TopLogprobs []genq.Logprob `json:"top_logprobs"`
}

// orEmpty is entries, or an empty list for none: a job that asked for
// log-probabilities gets a list, maybe empty, never null.
func orEmpty(entries []genq.TokenLogprob) []genq.TokenLogprob {
	if entries == nil {
		return []genq.TokenLogprob{}
	}
	return entries
}

// chatLogprobsOf renders a result's entries; nil (null) when the job did
// not ask for them.
func chatLogprobsOf(entries []genq.TokenLogprob) *chatLogprobs {
	if entries == nil {
		return nil
	}
	out := &chatLogprobs{Content: make([]chatLogprob, len(entries))}
	for i, e := range entries {
		out.Content[i] = chatLogprob{Logprob: e.Logprob, TopLogprobs: e.Top}
		if e.Top == nil {
			out.Content[i].TopLogprobs = []genq.Logprob{} // OpenAI's list is never null
		}
	}
	return out
}

// completionLogprobs are the legacy completions' log-probabilities: a
// column per token. Each top_logprobs entry holds the sampled token too,
// as vLLM's do; text_offset counts characters of the text. With echo the
// prompt's tokens come first, the first of them with null for its
// log-probability and its alternatives: nothing comes before it.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// completionLogprobsOf renders the entries of text, and before them those
// of an echoed prompt whose text starts text (prompt nil: no echo).
func completionLogprobsOf(text string, prompt, entries []genq.TokenLogprob, promptText string) *completionLogprobs {
	if entries == nil {
		return nil
	}
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	add := func(e genq.TokenLogprob, offset int, scored bool) {
		out.Tokens = append(out.Tokens, legacyToken(e.Logprob))
		out.TextOffset = append(out.TextOffset, charOffset(text, offset))
		if !scored {
			out.TokenLogprobs = append(out.TokenLogprobs, nil)
			out.TopLogprobs = append(out.TopLogprobs, nil)
			return
		}
		logprob := e.Logprob.Logprob
		out.TokenLogprobs = append(out.TokenLogprobs, &logprob)
		// Two tokens may read the same: the sampled one's entry wins.
		top := map[string]float64{}
		for _, t := range e.Top {
			top[legacyToken(t)] = t.Logprob
		}
		top[legacyToken(e.Logprob)] = logprob
		out.TopLogprobs = append(out.TopLogprobs, top)
	}
	for i, e := range prompt {
		add(e, e.Offset, i > 0)
	}
	for _, e := range entries {
		add(e, len(promptText)+e.Offset, true)
	}
	return out
}

// legacyToken is a token as the legacy completions write it: its text, or,
// for a token that holds part of a character (byte-level vocabularies
// split them), "bytes:" and its bytes as \xNN each, as OpenAI writes them.
func legacyToken(l genq.Logprob) string {
	b := make([]byte, len(l.Bytes))
	for i, v := range l.Bytes {
		b[i] = byte(v)
	}
	if utf8.Valid(b) {
		return l.Token
	}
	var sb strings.Builder
	sb.WriteString("bytes:")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	return sb.String()
}

// charOffset is the number of characters of text before its byte offset,
// a character's start; past the end, all of them.
func charOffset(text string, offset int) int {
	return utf8.RuneCountInString(text[:min(offset, len(text))])
}
