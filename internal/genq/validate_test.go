package genq_test

import (
	"math"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestJobValidate(t *testing.T) {
	ok := genq.Job{Envelope: genq.Envelope{ID: "0193f1c2-7d1e_x", Variant: genq.VariantB, Text: "hi"}}
	tests := []struct {
		name string
		edit func(*genq.Job)
		want string // "" when valid
	}{
		{"valid", func(*genq.Job) {}, ""},
		{"longest id", func(j *genq.Job) { j.ID = strings.Repeat("a", genq.MaxJobIDLen) }, ""},
		{"empty id", func(j *genq.Job) { j.ID = "" }, "job id"},
		{"id too long", func(j *genq.Job) { j.ID = strings.Repeat("a", genq.MaxJobIDLen+1) }, "job id"},
		{"id with a dot", func(j *genq.Job) { j.ID = "a.b" }, "job id"},
		{"id with a path", func(j *genq.Job) { j.ID = "../../etc" }, "job id"},
		{"id not ASCII", func(j *genq.Job) { j.ID = "é" }, "job id"},
		{"unknown variant", func(j *genq.Job) { j.Variant = "D" }, "unknown variant"},
		{"lower-case variant", func(j *genq.Job) { j.Variant = "b" }, "unknown variant"},
		{"no text", func(j *genq.Job) { j.Text = "" }, "text field is required"},
		{"chat", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: "again"}}
		}, ""},
		{"raw prompt", func(j *genq.Job) { j.Text, j.Prompt = "", "Once upon" }, ""},
		{"prompt of token ids", func(j *genq.Job) { j.Text, j.PromptTokenIDs = "", []int32{1, 2, 3} }, ""},
		{"prompt and token ids", func(j *genq.Job) { j.Text, j.Prompt, j.PromptTokenIDs = "", "x", []int32{1} }, "not 2 of them"},
		{"a negative token id", func(j *genq.Job) { j.Text, j.PromptTokenIDs = "", []int32{1, -1} }, "ids are not negative"},
		{"too many token ids", func(j *genq.Job) { j.Text, j.PromptTokenIDs = "", make([]int32, genq.MaxPromptTokenIDs+1) }, "the limit is 131072"},
		{"text and prompt", func(j *genq.Job) { j.Prompt = "x" }, "one of text, messages, prompt and prompt_token_ids"},
		{"text and messages", func(j *genq.Job) { j.Messages = []genq.Message{{Role: "user", Content: "x"}} }, "one of text, messages, prompt and prompt_token_ids"},
		{"unknown role", func(j *genq.Job) { j.Text, j.Messages = "", []genq.Message{{Role: "function", Content: "x"}} }, `role "function"`},
		{"no content", func(j *genq.Job) { j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: " "}} }, "some content"},
		{"tool round trip", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: "weather?"},
				{Role: "assistant", ToolCalls: []genq.ToolCall{{ID: "call_1", Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: `{"city":"Oslo"}`}}}},
				{Role: "tool", ToolCallID: "call_1", Content: "sunny"}}
			j.Tools = []genq.Tool{weatherTool}
		}, ""},
		{"tool turn without its call id", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: "x"}, {Role: "tool", Content: "sunny"}}
		}, "needs tool_call_id"},
		{"tool calls from the user", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: "x", ToolCalls: []genq.ToolCall{{Function: genq.ToolCallFunction{Name: "w", Arguments: "{}"}}}}}
		}, "only an assistant"},
		{"tool call arguments not JSON", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "assistant", ToolCalls: []genq.ToolCall{{Function: genq.ToolCallFunction{Name: "w", Arguments: "{"}}}}}
		}, "arguments is not JSON"},
		{"tools", func(j *genq.Job) { j.Text, j.Prompt, j.Tools = "", "x", []genq.Tool{weatherTool} }, ""},
		{"tools on a seed job", func(j *genq.Job) { j.Tools = []genq.Tool{weatherTool} }, "need messages or a prompt"},
		{"tool without a name", func(j *genq.Job) {
			j.Text, j.Prompt, j.Tools = "", "x", []genq.Tool{{Type: "function"}}
		}, "tools[0].function.name is required"},
		{"tool of another type", func(j *genq.Job) {
			j.Text, j.Prompt, j.Tools = "", "x", []genq.Tool{{Type: "code_interpreter", Function: genq.ToolFunction{Name: "w"}}}
		}, `tools[0].type "code_interpreter"`},
		{"tool name with a space", func(j *genq.Job) {
			j.Text, j.Prompt, j.Tools = "", "x", []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get weather"}}}
		}, "letters, digits"},
		{"two tools of one name", func(j *genq.Job) { j.Text, j.Prompt, j.Tools = "", "x", []genq.Tool{weatherTool, weatherTool} }, "names two tools"},
		{"tool_choice of an unknown function", func(j *genq.Job) {
			j.Text, j.Prompt, j.Tools, j.ToolChoice = "", "x", []genq.Tool{weatherTool}, &genq.ToolChoice{Function: "nope"}
		}, `names function "nope"`},
		{"tool_choice without tools", func(j *genq.Job) {
			j.Text, j.Prompt, j.ToolChoice = "", "x", &genq.ToolChoice{Mode: "required"}
		}, "tool_choice needs tools"},
		{"json_object", func(j *genq.Job) {
			j.Text, j.Prompt, j.ResponseFormat = "", "x", &genq.ResponseFormat{Type: "json_object"}
		}, ""},
		{"json_schema without a schema", func(j *genq.Job) {
			j.Text, j.Prompt, j.ResponseFormat = "", "x", &genq.ResponseFormat{Type: "json_schema", JSONSchema: &genq.JSONSchema{Name: "a"}}
		}, "schema is required"},
		{"response_format of an unknown type", func(j *genq.Job) {
			j.Text, j.Prompt, j.ResponseFormat = "", "x", &genq.ResponseFormat{Type: "yaml"}
		}, `response_format.type "yaml"`},
		{"response_format and required tools", func(j *genq.Job) {
			j.Text, j.Prompt, j.Tools, j.ResponseFormat = "", "x", []genq.Tool{weatherTool}, &genq.ResponseFormat{Type: "json_object"}
		}, "cannot both constrain"},

		{"NUL in a message", func(j *genq.Job) { j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: "a\x00"}} }, ""},
		{"NUL in reasoning_content", func(j *genq.Job) {
			j.Text, j.Messages = "", []genq.Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b", ReasoningContent: "\x00"}}
		}, ""},
		{"NUL in a raw prompt", func(j *genq.Job) { j.Text, j.Prompt = "", "a\x00b" }, ""},
		{"too many messages", func(j *genq.Job) {
			j.Text, j.Messages = "", make([]genq.Message, genq.MaxMessages+1)
			for i := range j.Messages {
				j.Messages[i] = genq.Message{Role: "user", Content: "x"}
			}
		}, "the limit is 1024"},
		{"params in range", func(j *genq.Job) {
			j.MaxTokens, j.Temperature, j.TopP, j.Seed, j.Stop = 5, ptr(2.0), ptr(0.0), ptr(int64(-1)), genq.StopList{"a", "b", "c", "d"}
		}, ""},
		{"max_tokens negative", func(j *genq.Job) { j.MaxTokens = -1 }, "max_tokens must be at least 1"},
		{"both max tokens disagree", func(j *genq.Job) { j.MaxTokens, j.MaxCompletionTokens = 4, 5 }, "disagree"},
		{"prompt only, echoed", func(j *genq.Job) { j.Text, j.Prompt, j.PromptOnly, j.Echo = "", "x", true, true }, ""},
		{"prompt only without echo", func(j *genq.Job) { j.Text, j.Prompt, j.PromptOnly = "", "x", true }, "with echo: true"},
		{"prompt only with a limit", func(j *genq.Job) { j.Text, j.Prompt, j.PromptOnly, j.Echo, j.MaxTokens = "", "x", true, true, 3 }, "leave max_tokens out"},
		{"temperature too high", func(j *genq.Job) { j.Temperature = ptr(2.5) }, "temperature must be between 0 and 2"},
		{"temperature NaN", func(j *genq.Job) { j.Temperature = ptr(math.NaN()) }, "temperature must be"},
		{"top_p over 1", func(j *genq.Job) { j.TopP = ptr(1.5) }, "top_p must be between 0 and 1"},
		{"logprobs of a chat", func(j *genq.Job) {
			j.Text, j.Messages, j.Logprobs, j.TopLogprobs = "", []genq.Message{{Role: "user", Content: "x"}}, true, genq.MaxTopLogprobs
		}, ""},
		{"top_logprobs over 20", func(j *genq.Job) { j.Text, j.Prompt, j.Logprobs, j.TopLogprobs = "", "x", true, 21 }, "top_logprobs must be between 0 and 20"},
		{"top_logprobs without logprobs", func(j *genq.Job) { j.Text, j.Prompt, j.TopLogprobs = "", "x", 2 }, "top_logprobs needs logprobs: true"},
		{"logprobs of a text job", func(j *genq.Job) { j.Logprobs = true }, "one-field result of POST /generate"},
		{"vLLM's top_k and min_p", func(j *genq.Job) { j.TopK, j.MinP = ptr(-1), ptr(1.0) }, ""},
		{"vLLM's repetition_penalty and ignore_eos", func(j *genq.Job) { j.RepetitionPenalty, j.IgnoreEOS = ptr(1.2), true }, ""},
		{"repetition_penalty 0", func(j *genq.Job) { j.RepetitionPenalty = ptr(0.0) }, "repetition_penalty must be above 0"},
		{"repetition_penalty too high", func(j *genq.Job) { j.RepetitionPenalty = ptr(11.0) }, "at most 10"},
		{"top_k below -1", func(j *genq.Job) { j.TopK = ptr(-2) }, "top_k must be -1 or 0"},
		{"min_p over 1", func(j *genq.Job) { j.MinP = ptr(1.5) }, "min_p must be between 0 and 1"},
		{"penalties and biases in range", func(j *genq.Job) {
			j.FrequencyPenalty, j.PresencePenalty, j.LogitBias = ptr(-2.0), ptr(2.0), map[int32]float64{0: -100, 128000: 100}
		}, ""},
		{"frequency_penalty too high", func(j *genq.Job) { j.FrequencyPenalty = ptr(2.01) }, "frequency_penalty must be between -2 and 2"},
		{"presence_penalty NaN", func(j *genq.Job) { j.PresencePenalty = ptr(math.NaN()) }, "presence_penalty must be"},
		{"bias too low", func(j *genq.Job) { j.LogitBias = map[int32]float64{3: -100.5} }, "logit_bias for token 3 must be between -100 and 100"},
		{"bias NaN", func(j *genq.Job) { j.LogitBias = map[int32]float64{3: math.NaN()} }, "logit_bias for token 3"},
		{"bias of a negative id", func(j *genq.Job) { j.LogitBias = map[int32]float64{-4: 1} }, "token ids are not negative"},
		{"too many biases", func(j *genq.Job) {
			j.LogitBias = map[int32]float64{}
			for id := range int32(genq.MaxLogitBiases + 1) {
				j.LogitBias[id] = 1
			}
		}, "the limit is 1024"},
		{"five stops", func(j *genq.Job) { j.Stop = genq.StopList{"a", "b", "c", "d", "e"} }, "the limit is 4"},
		{"empty stop", func(j *genq.Job) { j.Stop = genq.StopList{""} }, "must not be empty"},
		{"long stop", func(j *genq.Job) { j.Stop = genq.StopList{strings.Repeat("x", genq.MaxStopBytes+1)} }, "stop string is 257 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := ok
			tt.edit(&j)
			err := j.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(genq.ErrorMessage(err), tt.want)):
				t.Fatalf("Validate() = %v, want a message with %q", err, tt.want)
			case tt.want != "" && genq.ErrorCode(err) != genq.Invalid:
				t.Fatalf("code = %s, want invalid", genq.ErrorCode(err))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

var weatherTool = genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "w", Parameters: []byte(`{"type":"object"}`)}}
