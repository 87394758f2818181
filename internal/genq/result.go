package genq

import (
	"encoding/json"
	"io"
	"time"
)

// Result is what a backend produces: the exact bytes a caller receives, and
// their media type.
type Result struct {
	ContentType string
	Data        []byte
}

// ReceivedResult is a job's successful result as its producer receives it, the
// other end of the worker's reply. Body streams the bytes, from the reply
// message itself or from the results store; the receiver must close it.
type ReceivedResult struct {
	JobID       string
	ContentType string
	Size        int64
	Body        io.ReadCloser
	QueueWait   time.Duration
	RunTime     time.Duration
	Attempt     int
	Worker      string
}

// TextResult is the body of a text result, the same JSON on the queue and
// over HTTP /generate. A detailed job's result (Job.Detailed) also says why
// the answer ended and how many tokens it took, from which the api builds
// OpenAI's objects.
type TextResult struct {
	GeneratedText string `json:"generated_text"`
	// Reasoning is the answer's reasoning, apart from its text, when the
	// model's template reasons and the job let it think (Job.Thinking):
	// what it wrote inside its reasoning block (Qwen3's <think>), before
	// GeneratedText. Empty for a model that does not reason.
	Reasoning string `json:"reasoning,omitempty"`
	// FinishReason is FinishStop, FinishLength or FinishToolCalls.
	FinishReason string `json:"finish_reason,omitempty"`
	// StopSequence is the job's stop string that ended the answer, when
	// one did (FinishReason is then FinishStop).
	StopSequence string `json:"stop_sequence,omitempty"`
	// ToolCalls are the calls the answer made, when the job offered tools
	// and the model called them: GeneratedText is then the calls' text as
	// the model wrote it.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// UncheckedToolCalls are the calls among ToolCalls whose arguments
	// genq could not guarantee: their tool's schema was relaxed to be
	// served (genq could not enforce it exactly), and the finished
	// arguments fail it, or could not be checked against it.
	UncheckedToolCalls []UncheckedToolCall `json:"unchecked_tool_calls,omitempty"`
	Usage              *Usage              `json:"usage,omitempty"`
	// Logprobs has one entry per token of the text, in order, when the job
	// asked for them.
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`
	// PromptText is the prompt's text as the model read it, and
	// PromptLogprobs an entry per prompt token (the first unscored: logprob
	// 0, no alternatives), when the job asked for its prompt echoed.
	PromptText     string         `json:"prompt_text,omitempty"`
	PromptLogprobs []TokenLogprob `json:"prompt_logprobs,omitempty"`
}

// UncheckedToolCall is a call whose arguments genq could not guarantee
// (TextResult.UncheckedToolCalls): its index among the answer's calls, its
// tool, and why, which names where the arguments fail the schema, never
// their content.
type UncheckedToolCall struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// MaxTextResultBytes bounds a text result read into memory, by the api and
// by a follower of streamed chunks; text results are a few KiB.
const MaxTextResultBytes = 16 << 20

// TokenLogprob is one answer token's log-probability, with the most likely
// tokens at its position when the job asked for them.
type TokenLogprob struct {
	Logprob
	// Offset is where, in bytes, the character that holds the token's
	// first byte starts in the answer's text: the token's own start unless
	// it begins inside a character (byte-level vocabularies split them) or
	// in bytes that are not UTF-8 (which the text holds as U+FFFD).
	Offset int       `json:"offset"`
	Top    []Logprob `json:"top_logprobs,omitempty"`
}

// Logprob is a token's text, its bytes (a token may hold part of a
// character, so the text alone cannot say) and its log-probability.
type Logprob struct {
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

// MinLogprob stands for a log-probability of -Inf, which JSON cannot hold:
// vLLM's choice.
const MinLogprob = -9999.0

// Why an answer ended: an end-of-turn token or a stop string, the token
// limit, or the end of the tool calls it made.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Usage counts a job's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens the backend reused from its
	// cache rather than computed.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens are the completion tokens of the answer's
	// reasoning (TextResult.Reasoning), its closing tag aside.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// NewDetailedTextResult wraps generated text with its finish reason and
// token counts, the result of a detailed job.
func NewDetailedTextResult(text, finishReason string, usage Usage, logprobs []TokenLogprob) Result {
	return TextResult{GeneratedText: text, FinishReason: finishReason, Usage: &usage, Logprobs: logprobs}.Result()
}

// Result is the response as a job's result.
func (r TextResult) Result() Result {
	b, _ := json.Marshal(r) // plain values: cannot fail
	return Result{ContentType: "application/json", Data: b}
}

// NewTextResult wraps generated text as the JSON body variants A and B return.
func NewTextResult(text string) Result {
	b, _ := json.Marshal(TextResult{GeneratedText: text}) // a struct of one string cannot fail
	return Result{ContentType: "application/json", Data: b}
}

// NewImageResult wraps PNG bytes as the body variant C returns.
func NewImageResult(png []byte) Result {
	return Result{ContentType: "image/png", Data: png}
}

// StoredFile is a file of the Batch API as its store keeps it: a batch's
// input uploaded by a client, or the output and error files of a batch.
type StoredFile struct {
	ID        string
	Filename  string
	Purpose   string
	Bytes     int64
	CreatedAt int64 // Unix seconds
}
