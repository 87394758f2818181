package genq

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// TextRequest is what a job of the text variants asks for besides its
// envelope: its input, unless it is the envelope's text alone, and how to
// answer it. Two of its fields serve images too: Seed is an image's noise
// seed, and Stream asks for an image's previews.
type TextRequest struct {
	// Messages is a chat, rendered with the model's chat template; Prompt is
	// raw text, given to the model as it is (completions). A job carries
	// exactly one of Text, Messages, Prompt and PromptTokenIDs.
	Messages []Message `json:"messages,omitempty"`
	Prompt   string    `json:"prompt,omitempty"`
	// PromptTokenIDs is a raw prompt already tokenized by its producer,
	// given to the model as it is (no BOS added): OpenAI's completions take
	// a prompt as a list of token ids too.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	// MaxTokens bounds the answer, in tokens; 0 answers up to the worker's
	// cap or the end of the context. Above the worker's cap it is capped;
	// past what the context leaves after the prompt the job is invalid
	// (Limits.Answer). MaxCompletionTokens is the same setting under
	// OpenAI's newer name; a job may give either.
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	// MaxTokensBound marks max_tokens as a bound, not a demand:
	// Anthropic's clients send their whole output budget (Claude Code:
	// 128,000 tokens) whatever the model, so it is capped at what the
	// context leaves after the prompt where OpenAI's routes refuse it
	// (Limits.Answer). Workers older than the rule that caps every
	// max_tokens at the worker's cap read it to cap this one too.
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
	// Thinking is what the client asked of the model's reasoning
	// (Anthropic's thinking): on, within a budget of tokens when it gives
	// one, or off. A worker whose template reasons may give the answer's
	// reasoning apart from its text; one whose template does not answers
	// without it. Omitted: the worker's default.
	Thinking *Thinking `json:"thinking,omitempty"`

	// IgnoredTools names the tools of the request that genq cannot run
	// (hosted tools: web search, code execution, …) and left out of the
	// prompt, for the answer's genq-tools-ignored header. It does not
	// travel.
	IgnoredTools []string `json:"-"`

	// MaxTokensParam is the name the client gave the answer's limit in,
	// for messages, when it is neither max_tokens nor
	// max_completion_tokens (the Responses API's max_output_tokens). It
	// does not travel.
	MaxTokensParam string `json:"-"`
}

// Thinking is a request's reasoning: Enabled asks the model to think
// before it answers, in at most BudgetTokens tokens when that is above 0
// (Anthropic's budget_tokens; 0 lets the model decide, as "adaptive"
// does). A template that reads enable_thinking gets Enabled. Effort is
// the level a client named (OpenAI's reasoning_effort: "minimal", "low",
// "medium", "high", "xhigh"), for a template that takes one (gpt-oss's
// reasoning_effort); empty when it named none.
type Thinking struct {
	Enabled      bool   `json:"enabled"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Effort       string `json:"effort,omitempty"`
}

// MaxNewTokens is the answer's token limit the job asks for, 0 when it
// leaves it to the worker.
func (j TextRequest) MaxNewTokens() int { return max(j.MaxTokens, j.MaxCompletionTokens) }

// Detailed reports whether the job's result carries its finish reason and
// token counts besides the text: chats and raw prompts do, and a job of
// text alone keeps POST /generate's result of one field.
func (j TextRequest) Detailed() bool {
	return len(j.Messages) > 0 || j.Prompt != "" || len(j.PromptTokenIDs) > 0
}

// MaxTokensField names the field a job gave its answer's limit in, as its
// client wrote it.
func (j TextRequest) MaxTokensField() string {
	if j.MaxTokensParam != "" {
		return j.MaxTokensParam
	}
	if j.MaxTokens == 0 && j.MaxCompletionTokens > 0 {
		return "max_completion_tokens"
	}
	return "max_tokens"
}

func (j TextRequest) validateParams() error {
	switch {
	case j.MaxTokens < 0:
		return Errorf(Invalid, "max_tokens must be at least 1, not %d", j.MaxTokens)
	case j.MaxCompletionTokens < 0:
		return Errorf(Invalid, "max_completion_tokens must be at least 1, not %d", j.MaxCompletionTokens)
	case j.MaxTokens > 0 && j.MaxCompletionTokens > 0 && j.MaxTokens != j.MaxCompletionTokens:
		return Errorf(Invalid, "max_tokens (%d) and max_completion_tokens (%d) disagree: give one", j.MaxTokens, j.MaxCompletionTokens)
	case j.PromptOnly && !j.Echo:
		return Errorf(Invalid, "max_tokens must be at least 1, not 0 (0 is for scoring a prompt, with echo: true)")
	case j.PromptOnly && j.MaxNewTokens() > 0:
		return Errorf(Invalid, "prompt_only generates nothing: leave max_tokens out")
	case j.CountOnly && (j.Stream || j.PromptOnly || j.Echo):
		return Errorf(Invalid, "count_only answers a count: it neither streams nor echoes")
	}
	if th := j.Thinking; th != nil && (th.BudgetTokens < 0 || !th.Enabled && th.BudgetTokens > 0) {
		return Errorf(Invalid, "thinking.budget_tokens must be at least 0, and 0 when thinking is off, not %d", th.BudgetTokens)
	}
	if t := j.Temperature; t != nil && !(*t >= 0 && *t <= MaxTemperature) { // NaN fails too
		return Errorf(Invalid, "temperature must be between 0 and %g, not %v", MaxTemperature, *t)
	}
	if p := j.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return Errorf(Invalid, "top_p must be between 0 and 1, not %v", *p)
	}
	switch {
	case j.TopLogprobs < 0 || j.TopLogprobs > MaxTopLogprobs:
		return Errorf(Invalid, "top_logprobs must be between 0 and %d, not %d", MaxTopLogprobs, j.TopLogprobs)
	case j.TopLogprobs > 0 && !j.Logprobs:
		return Errorf(Invalid, "top_logprobs needs logprobs: true")
	case (j.Logprobs || j.Echo) && !j.Detailed():
		return Errorf(Invalid, "logprobs and echo are for jobs of messages, prompt or prompt_token_ids: a job of text alone keeps the one-field result of POST /generate")
	}
	if k := j.TopK; k != nil && *k < -1 {
		return Errorf(Invalid, "top_k must be -1 or 0 (every token) or a count, not %d", *k)
	}
	if p := j.MinP; p != nil && !(*p >= 0 && *p <= 1) {
		return Errorf(Invalid, "min_p must be between 0 and 1, not %v", *p)
	}
	if p := j.RepetitionPenalty; p != nil && !(*p > 0 && *p <= MaxRepetitionPenalty) {
		return Errorf(Invalid, "repetition_penalty must be above 0 and at most %g (1 is none), not %v", MaxRepetitionPenalty, *p)
	}
	for _, p := range []struct {
		name  string
		value *float64
	}{{"frequency_penalty", j.FrequencyPenalty}, {"presence_penalty", j.PresencePenalty}} {
		if v := p.value; v != nil && !(*v >= -MaxPenalty && *v <= MaxPenalty) { // NaN fails too
			return Errorf(Invalid, "%s must be between %g and %g, not %v", p.name, -MaxPenalty, MaxPenalty, *v)
		}
	}
	if len(j.LogitBias) > MaxLogitBiases {
		return Errorf(Invalid, "logit_bias holds %d tokens; the limit is %d", len(j.LogitBias), MaxLogitBiases)
	}
	for id, bias := range j.LogitBias {
		switch {
		case id < 0:
			return Errorf(Invalid, "logit_bias names token %d: token ids are not negative", id)
		case !(bias >= -MaxLogitBias && bias <= MaxLogitBias):
			return Errorf(Invalid, "logit_bias for token %d must be between %g and %g, not %v", id, -MaxLogitBias, MaxLogitBias, bias)
		}
	}
	if len(j.Stop) > MaxStops {
		return Errorf(Invalid, "stop holds %d strings; the limit is %d", len(j.Stop), MaxStops)
	}
	for _, s := range j.Stop {
		switch {
		case s == "":
			return Errorf(Invalid, "stop strings must not be empty")
		case len(s) > MaxStopBytes:
			return Errorf(Invalid, "a stop string is %d bytes long; the limit is %d", len(s), MaxStopBytes)
		case !utf8.ValidString(s):
			return Errorf(Invalid, "stop strings must be valid UTF-8")
		}
	}
	return nil
}

// validateStructured checks the fields of structured output and tools
// that need no schema compiler: the compiler's own checks (the schemas'
// keywords) run where the grammar is built.
func (j TextRequest) validateStructured() error {
	if f := j.ResponseFormat; f != nil {
		switch f.Type {
		case FormatText, FormatJSONObject:
			if f.JSONSchema != nil {
				return Errorf(Invalid, "response_format.json_schema is only for type %q", FormatJSONSchema)
			}
		case FormatJSONSchema:
			if f.JSONSchema == nil || len(bytes.TrimSpace(f.JSONSchema.Schema)) == 0 {
				return Errorf(Invalid, "response_format.json_schema.schema is required with type %q", FormatJSONSchema)
			}
			if f.JSONSchema.Name != "" && !toolName.MatchString(f.JSONSchema.Name) {
				return Errorf(Invalid, "response_format.json_schema.name %q must be 1 to 64 letters, digits, underscores or dashes", f.JSONSchema.Name)
			}
		default:
			return Errorf(Invalid, `response_format.type %q is not one of "text", "json_object" and "json_schema"`, f.Type)
		}
	}
	if len(j.Tools) > MaxTools {
		return Errorf(Invalid, "tools holds %d tools; the limit is %d", len(j.Tools), MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range j.Tools {
		if t.Type != "function" {
			return Errorf(Invalid, `tools[%d].type %q is not "function"`, i, t.Type)
		}
		if t.Function.Name == "" {
			return Errorf(Invalid, "tools[%d].function.name is required", i)
		}
		if !toolName.MatchString(t.Function.Name) {
			return Errorf(Invalid, "tools[%d].function.name %q must be 1 to 64 letters, digits, underscores or dashes", i, t.Function.Name)
		}
		if seen[t.Function.Name] {
			return Errorf(Invalid, "tools[%d].function.name %q names two tools", i, t.Function.Name)
		}
		seen[t.Function.Name] = true
	}
	if c := j.ToolChoice; c != nil {
		if len(j.Tools) == 0 && c.Mode != ToolChoiceNone {
			return Errorf(Invalid, "tool_choice needs tools")
		}
		if c.Function != "" && !seen[c.Function] {
			return Errorf(Invalid, "tool_choice names function %q, which tools does not hold", c.Function)
		}
	}
	if j.ParallelToolCalls != nil && len(j.Tools) == 0 {
		return Errorf(Invalid, "parallel_tool_calls needs tools")
	}
	if len(j.Tools) > 0 && j.ResponseFormat != nil && j.ResponseFormat.Type != FormatText && j.toolChoice() != ToolChoiceNone {
		return Errorf(Invalid, "response_format and tools cannot both constrain one answer; set tool_choice to \"none\" or drop one")
	}
	if (len(j.Tools) > 0 || j.ResponseFormat != nil) && !j.Detailed() {
		return Errorf(Invalid, "response_format and tools need messages or a prompt")
	}
	return nil
}

// toolChoice is the mode the job's tools are offered in: "auto" when it
// sets none, as OpenAI does, and "required" for a named function.
func (j TextRequest) toolChoice() string {
	switch {
	case j.ToolChoice == nil:
		return ToolChoiceAuto
	case j.ToolChoice.Function != "":
		return ToolChoiceRequired
	}
	return j.ToolChoice.Mode
}

// ToolMode is how the job's tools are offered: "" when it has none (or
// tool_choice is "none"), else "auto" or "required" (a named function
// included).
func (j TextRequest) ToolMode() string {
	if len(j.Tools) == 0 {
		return ""
	}
	if m := j.toolChoice(); m != ToolChoiceNone {
		return m
	}
	return ""
}

// OfferedTools is the tools the answer may call: all of them, or the one
// tool_choice names.
func (j TextRequest) OfferedTools() []Tool {
	if j.ToolMode() == "" {
		return nil
	}
	if j.ToolChoice != nil && j.ToolChoice.Function != "" {
		for _, t := range j.Tools {
			if t.Function.Name == j.ToolChoice.Function {
				return []Tool{t}
			}
		}
	}
	return j.Tools
}

// PromptTools is the tools a prompt shows the model: those it may call,
// and with tool_choice "none" all of them still, as vLLM shows them, so
// that a conversation that called them reads as it did.
func (j TextRequest) PromptTools() []Tool {
	if offered := j.OfferedTools(); len(offered) > 0 {
		return offered
	}
	return j.Tools
}

// Parallel reports whether the answer may make more than one call:
// parallel_tool_calls, true unless the job says otherwise, as OpenAI's.
func (j TextRequest) Parallel() bool { return j.ParallelToolCalls == nil || *j.ParallelToolCalls }

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a chat. An assistant's turn may hold the tool
// calls it made, and the reasoning it gave before its content (sent back
// by the client: Anthropic's thinking blocks, a chat's reasoning_content),
// which a template that reads reasoning_content gets and others never
// see; a tool's turn answers the call ToolCallID names.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
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
