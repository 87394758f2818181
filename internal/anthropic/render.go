package anthropic

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// Message is the Messages API's answer.
type Message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        Usage          `json:"usage"`
}

// ContentBlock is a thinking, text or tool_use block of an answer.
type ContentBlock struct {
	Type string  `json:"type"`
	Text *string `json:"text,omitempty"`
	// thinking: the reasoning, and its signature
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage is an answer's token counts. The prompt tokens the prefix cache
// held are read from it (cache_read_input_tokens); input_tokens counts the
// others, as the API does. genq writes no cache of its own on request, so
// cache_creation_input_tokens is 0.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Answer is what a message is made of: the job's id and model, and its
// result.
type Answer struct {
	JobID string
	Model string
}

// MessageID is the id of job's message.
func MessageID(jobID string) string { return "msg_" + jobID }

// usage is the result's counts as the API gives them.
func usage(u *genq.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens}
}

// stopReason is the API's stop_reason of a result, and its stop_sequence.
func stopReason(r genq.TextResult) (string, *string) {
	switch {
	case r.FinishReason == genq.FinishLength:
		return "max_tokens", nil
	case r.FinishReason == genq.FinishToolCalls || len(r.ToolCalls) > 0:
		return "tool_use", nil
	case r.StopSequence != "":
		s := r.StopSequence
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

// signaturePrefix begins every signature genq gives a thinking block.
const signaturePrefix = "genq1."

// Signature is the signature of a thinking block of genq's that holds
// thinking: genq's prefix and the base64 of its text's SHA-256. Clients
// keep it opaque and send it back with the block; it signs nothing
// (genq keeps no key), it only lets genq know its own blocks.
func Signature(thinking string) string {
	sum := sha256.Sum256([]byte("genq thinking\x00" + thinking))
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Signed reports whether signature is the one genq gave thinking.
func Signed(thinking, signature string) bool {
	return strings.HasPrefix(signature, signaturePrefix) && signature == Signature(thinking)
}

// thinkingBlock is the block of a result's reasoning.
func thinkingBlock(thinking string) ContentBlock {
	sig := Signature(thinking)
	return ContentBlock{Type: "thinking", Thinking: &thinking, Signature: &sig}
}

// Render is the whole message of a result: its reasoning, when the model
// gave one, as a thinking block first; then its text as a text block, or
// its calls as tool_use blocks with their input as objects.
func (a Answer) Render(r genq.TextResult) Message {
	reason, seq := stopReason(r)
	m := Message{ID: MessageID(a.JobID), Type: "message", Role: genq.RoleAssistant, Model: a.Model,
		Content: []ContentBlock{}, StopReason: &reason, StopSequence: seq, Usage: usage(r.Usage)}
	if r.Reasoning != "" {
		m.Content = append(m.Content, thinkingBlock(r.Reasoning))
	}
	if len(r.ToolCalls) == 0 {
		text := r.GeneratedText
		m.Content = append(m.Content, ContentBlock{Type: "text", Text: &text})
		return m
	}
	for _, c := range r.ToolCalls {
		m.Content = append(m.Content, toolUse(c.ID, c.Function.Name, c.Function.Arguments))
	}
	return m
}

// toolUse is a call's block; arguments that are not an object (a model
// cut short) are given as the empty object, as input must be one.
func toolUse(id, name, arguments string) ContentBlock {
	input := json.RawMessage(arguments)
	var obj map[string]json.RawMessage
	if json.Unmarshal(input, &obj) != nil {
		input = json.RawMessage("{}")
	}
	return ContentBlock{Type: "tool_use", ID: id, Name: name, Input: input}
}

// CountTokens is count_tokens' answer.
type CountTokens struct {
	InputTokens int `json:"input_tokens"`
}

// Count is the answer to a count_tokens job.
func Count(r genq.TextResult) CountTokens {
	if r.Usage == nil {
		return CountTokens{}
	}
	return CountTokens{InputTokens: r.Usage.PromptTokens}
}
