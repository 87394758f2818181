package genq

import (
	"encoding/json"
	"time"
)

// Job is one generation request as it travels on the queue. Its JSON form is
// the job message of docs/protocol.md.
type Job struct {
	// ID is a UUID; it is also the message's Nats-Msg-Id, so a job published
	// twice inside the dedup window runs once.
	ID      string  `json:"id"`
	Variant Variant `json:"variant"`
	Text    string  `json:"text"`
	// Deadline is when the caller stops waiting. A worker drops a job whose
	// deadline has passed, and a running job's context ends at it.
	Deadline time.Time `json:"deadline"`
	// ReplyTo is the core NATS subject the result is published to. Empty
	// means nobody listens: the result is only kept in the results store.
	ReplyTo string `json:"reply_to,omitempty"`
	// Store asks the worker to keep the result in the results store, so it
	// can be fetched later by job id, even when it was also replied.
	Store bool `json:"store,omitempty"`

	// The fields below are a request's own generation parameters, all
	// optional: a job of text alone is generated with the worker's settings.

	// Messages is a chat, rendered with the model's chat template; Prompt is
	// raw text, given to the model as it is (completions). A job carries
	// exactly one of Text, Messages, Prompt and PromptTokenIDs.
	Messages []Message `json:"messages,omitempty"`
	Prompt   string    `json:"prompt,omitempty"`
	// PromptTokenIDs is a raw prompt already tokenized by its producer,
	// given to the model as it is (no BOS added): OpenAI's completions take
	// a prompt as a list of token ids too.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	// MaxTokens bounds the answer, in tokens; 0 takes the worker's limit,
	// and more than that limit is invalid. MaxCompletionTokens is the same
	// setting under OpenAI's newer name; a job may give either.
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	// MaxTokensBound makes MaxTokens a bound rather than a demand: a worker
	// whose own cap is lower answers up to that cap, where it would
	// otherwise refuse the job. Anthropic's clients send their whole
	// output budget (Claude Code: 32,000 tokens) whatever the model. A
	// worker older than the field refuses as before.
	MaxTokensBound bool `json:"max_tokens_bound,omitempty"`
	// PromptOnly asks for no answer at all, only the echoed prompt
	// (OpenAI's max_tokens: 0 with echo): how harnesses score a prompt's
	// likelihood. A worker older than the field ignores it and answers.
	PromptOnly bool `json:"prompt_only,omitempty"`
	// CountOnly asks for the prompt's token count alone (Anthropic's
	// count_tokens): the prompt is rendered and tokenized, nothing is run,
	// and the result's usage says how many tokens it holds. A worker older
	// than the field answers, so such jobs ask for one token.
	CountOnly bool `json:"count_only,omitempty"`
	// Temperature (0 to 2; 0 is greedy), TopP (0 to 1) and Seed override
	// the worker's sampling settings when set.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	// TopK (-1 or 0: every token) and MinP (0 to 1) are the extensions vLLM
	// and llama.cpp's server take beside OpenAI's fields; they override the
	// worker's top-k and its min-p of 0.
	TopK *int     `json:"top_k,omitempty"`
	MinP *float64 `json:"min_p,omitempty"`
	// RepetitionPenalty (above 0; 1 is none) is vLLM's and Hugging Face's:
	// the logit of every token in the prompt or the answer so far is
	// divided by it when positive, multiplied when negative.
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// IgnoreEOS (vLLM's) generates past end-of-turn tokens to the token
	// limit, for benchmarks that want answers of a fixed length.
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// FrequencyPenalty and PresencePenalty (-2 to 2) lower the logit of
	// every token the answer already holds, by the penalty times its count
	// and by the penalty once; LogitBias (-100 to 100 each) is added to the
	// logits of the token ids it names. OpenAI's definitions; in JSON the
	// ids are strings, as OpenAI's clients send them.
	FrequencyPenalty *float64          `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64          `json:"presence_penalty,omitempty"`
	LogitBias        map[int32]float64 `json:"logit_bias,omitempty"`
	// Logprobs asks for each answer token's log-probability under the
	// model's own distribution (the softmax of its raw logits, before
	// temperature, penalties and biases, as vLLM reports them), and
	// TopLogprobs (0 to MaxTopLogprobs) for that many of the most likely
	// tokens at each position. Detailed results only.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
	// Echo asks for the prompt back with the answer (prompt_text), scored
	// token by token when Logprobs is set too (prompt_logprobs): what
	// evaluation harnesses read a prompt's likelihood from. Detailed
	// results only; streaming ones give it whole with the reply.
	Echo bool `json:"echo,omitempty"`
	// Stop ends the answer before the first of these strings, which the
	// answer never holds. In JSON, a string or a list of strings.
	Stop StopList `json:"stop,omitempty"`
	// Stream asks a worker whose backend can (TextStreamer) to publish the
	// answer's text to ReplyTo as it is sampled, before the usual reply
	// (docs/protocol.md, "Streaming").
	Stream bool `json:"stream,omitempty"`
	// ResponseFormat holds the answer to free text, any JSON object or a
	// JSON schema; Tools are functions the model may call, offered as
	// ToolChoice says (by default "auto"), more than one call in an answer
	// unless ParallelToolCalls is false. Decoding is constrained to them
	// (docs/protocol.md, "Structured output and tools").
	ResponseFormat    *ResponseFormat `json:"response_format,omitempty"`
	Tools             []Tool          `json:"tools,omitempty"`
	ToolChoice        *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`

	// Image parameters (variant C), all optional: zero takes the worker's
	// setting. Seed above is the image's noise seed too. Width and Height
	// go together; NegativePrompt steers the image away from its text.
	NegativePrompt string   `json:"negative_prompt,omitempty"`
	Width          int      `json:"width,omitempty"`
	Height         int      `json:"height,omitempty"`
	Steps          int      `json:"num_inference_steps,omitempty"`
	GuidanceScale  *float64 `json:"guidance_scale,omitempty"`
	// OutputFormat is the image's format, ImagePNG (the default) or
	// ImageJPEG; OutputCompression is JPEG's quality, 0 to 100.
	OutputFormat      string `json:"output_format,omitempty"`
	OutputCompression *int   `json:"output_compression,omitempty"`
	// PartialImages asks a streaming image job (Stream) for this many
	// previews along its denoising, 0 to MaxPartialImages.
	PartialImages int `json:"partial_images,omitempty"`

	// MaxTokensParam is the name the client gave the answer's limit in,
	// for messages, when it is neither max_tokens nor
	// max_completion_tokens (the Responses API's max_output_tokens). It
	// does not travel.
	MaxTokensParam string `json:"-"`

	// Attempt is which delivery of the job this is, counted from 1. It comes
	// from JetStream's metadata, never from the message body.
	Attempt int `json:"-"`
}

// MaxNewTokens is the answer's token limit the job asks for, 0 when it
// leaves it to the worker.
func (j Job) MaxNewTokens() int { return max(j.MaxTokens, j.MaxCompletionTokens) }

// Detailed reports whether the job's result carries its finish reason and
// token counts besides the text: chats and raw prompts do, and a job of
// text alone keeps POST /generate's result of one field.
func (j Job) Detailed() bool {
	return len(j.Messages) > 0 || j.Prompt != "" || len(j.PromptTokenIDs) > 0
}

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a chat. An assistant's turn may hold the tool
// calls it made, and a tool's turn answers the call ToolCallID names.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// StopList is a job's stop strings. Its JSON is a list, and a single string
// is read as a list of one, as OpenAI's API allows.
type StopList []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *StopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StopList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return Errorf(Invalid, "stop must be a string or a list of strings")
	}
	*s = list
	return nil
}

// Expired reports whether the job's deadline has passed at now.
func (j Job) Expired(now time.Time) bool {
	return !j.Deadline.IsZero() && !now.Before(j.Deadline)
}
