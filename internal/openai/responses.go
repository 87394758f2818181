package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// ResponseRequest is the body of POST /v1/responses, OpenAI's Responses
// API, served stateless: a request carries its whole conversation.
type ResponseRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    string          `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	Stream          bool            `json:"stream"`

	// Read only to refuse them: genq keeps no conversation.
	Store              *bool           `json:"store"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`

	// Function tools, in the Responses API's flat shape.
	Tools             []responseTool      `json:"tools"`
	ToolChoice        *responseToolChoice `json:"tool_choice"`
	ParallelToolCalls *bool               `json:"parallel_tool_calls"`

	// Reasoning.Effort is a chat's reasoning_effort.
	Reasoning *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`

	// Text.Format holds the answer to JSON, as chats' response_format.
	Text *struct {
		Format *responseFormat `json:"format"`
	} `json:"text"`
}

// responseFormat is the Responses API's text.format: response_format's
// fields, the schema's beside its type.
type responseFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// job is the response format of a chat job: nil for free text.
func (f *responseFormat) job() *genq.ResponseFormat {
	switch {
	case f == nil || f.Type == "" || f.Type == genq.FormatText:
		return nil
	case f.Type == genq.FormatJSONSchema:
		return &genq.ResponseFormat{Type: f.Type, JSONSchema: &genq.JSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
	}
	return &genq.ResponseFormat{Type: f.Type}
}

// responseItem is one item of a request's input: a message, its content a
// string or a list of text parts; a function call the model made; or a
// call's output.
type responseItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`

	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`

	// A reasoning item's summary parts (its content is its text parts).
	Summary json.RawMessage `json:"summary"`
}

// reasoningText is the text of a reasoning item sent back: its content's
// reasoning_text parts or, without them, its summary's.
func (it responseItem) reasoningText() string {
	var parts []struct {
		Text string `json:"text"`
	}
	for _, raw := range []json.RawMessage{it.Content, it.Summary} {
		parts = parts[:0]
		if json.Unmarshal(raw, &parts) != nil {
			continue
		}
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		if text := strings.Join(texts, "\n"); text != "" {
			return text
		}
	}
	return ""
}

// DecodeResponse reads the body of a response request into job, a chat
// whose messages hold at most maxPrompt bytes of content.
func DecodeResponse(body []byte, maxPrompt int, job *genq.Job) (Params, error) {
	var req ResponseRequest
	if err := Decode(body, &req); err != nil {
		return Params{}, err
	}
	if msg := req.unsupported(); msg != "" {
		return Params{}, genq.Errorf(genq.Invalid, "%s", msg)
	}
	in, err := responseInput(req.Input)
	if err != nil {
		return Params{}, err
	}
	if req.Instructions != "" {
		in = append([]chatMessageIn{{Role: genq.RoleSystem, Content: mustJSON(req.Instructions)}}, in...)
	}
	msgs, err := messages(in, maxPrompt)
	if err != nil {
		return Params{}, err
	}
	job.Messages = msgs
	if n := req.MaxOutputTokens; n != nil {
		if *n < 1 {
			return Params{}, genq.Errorf(genq.Invalid, "max_output_tokens must be at least 1, not %d", *n)
		}
		job.MaxCompletionTokens, job.MaxTokensParam = *n, "max_output_tokens"
	}
	job.Temperature, job.TopP, job.Stream = req.Temperature, req.TopP, req.Stream
	if req.Reasoning != nil {
		if job.Thinking, err = thinkingOf(req.Reasoning.Effort, "reasoning.effort"); err != nil {
			return Params{}, err
		}
	}
	if req.Text != nil {
		job.ResponseFormat = req.Text.Format.job()
	}
	job.Tools, job.IgnoredTools = responseTools(req.Tools)
	if req.ToolChoice != nil {
		if err := forcesIgnored(&req.ToolChoice.ToolChoice, req.ToolChoice.Forced, job.IgnoredTools); err != nil {
			return Params{}, err
		}
		if job.ToolChoice, err = choiceOf(&req.ToolChoice.ToolChoice, job.Tools, job.IgnoredTools); err != nil {
			return Params{}, err
		}
	}
	if len(job.Tools) > 0 {
		job.ParallelToolCalls = req.ParallelToolCalls
	}
	return Params{Model: req.Model, Stream: req.Stream}, nil
}

// unsupported names the first thing req asks for that a stateless server
// cannot give; "" when there is none.
func (r ResponseRequest) unsupported() string {
	switch {
	case r.Store != nil && *r.Store:
		return "store: true is not supported: this server keeps no conversation state; send store: false (or leave it out) and the whole conversation in input"
	case r.PreviousResponseID != "":
		return "previous_response_id is not supported: this server keeps no conversation state; send the whole conversation in input"
	case len(r.Conversation) > 0 && string(r.Conversation) != "null":
		return "conversation is not supported: this server keeps no conversation state; send the whole conversation in input"
	}
	return ""
}

// responseInput is a request's input as chat messages: a string is one
// user message; a list holds messages, each of type "message" or of none.
func responseInput(raw json.RawMessage) ([]chatMessageIn, error) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, genq.Errorf(genq.Invalid, "input is required: a string, or a list of messages")
	case raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, Malformed(err)
		}
		return []chatMessageIn{{Role: genq.RoleUser, Content: raw}}, nil
	}
	var items []responseItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, genq.Errorf(genq.Invalid, "input must be a string, or a list of messages ({role, content})")
	}
	if len(items) == 0 {
		return nil, genq.Errorf(genq.Invalid, "input is required: a string, or a list of messages")
	}
	out := make([]chatMessageIn, 0, len(items))
	// reasoning is a reasoning item's text, for the assistant's turn that
	// follows it (its message, or its first call).
	reasoning := ""
	for i, it := range items {
		switch it.Type {
		case "", "message":
			content, err := responseContent(it.Content)
			if err != nil {
				return nil, genq.Errorf(genq.Invalid, "input[%d].content %s", i, err.Error())
			}
			out = append(out, chatMessageIn{Role: it.Role, Content: content})
			if it.Role == genq.RoleAssistant {
				out[len(out)-1].ReasoningContent, reasoning = reasoning, ""
			}
		case "reasoning":
			reasoning = joinText(reasoning, it.reasoningText())
		case "function_call":
			call := genq.ToolCall{ID: it.CallID, Type: "function", Function: genq.ToolCallFunction{Name: it.Name, Arguments: it.Arguments}}
			// The calls of one turn come as items one after another: one
			// assistant message holds them.
			if n := len(out); n > 0 && out[n-1].Role == genq.RoleAssistant && len(out[n-1].ToolCalls) > 0 && reasoning == "" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
			} else {
				out = append(out, chatMessageIn{Role: genq.RoleAssistant, ToolCalls: []genq.ToolCall{call}, ReasoningContent: reasoning})
				reasoning = ""
			}
		case "function_call_output":
			content, err := responseContent(it.Output)
			if err != nil {
				return nil, genq.Errorf(genq.Invalid, "input[%d].output %s", i, err.Error())
			}
			out = append(out, chatMessageIn{Role: genq.RoleTool, Content: content, ToolCallID: it.CallID})
		default:
			return nil, genq.Errorf(genq.Invalid, "input[%d] is of type %q: only messages, reasoning, function calls and their outputs are supported", i, it.Type)
		}
	}
	return out, nil
}

// responseContent is a message's content as a chat's: a string, or its
// text parts (input_text, output_text) joined.
func responseContent(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '[' {
		return raw, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, errors.New("must be a string or a list of text parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		default:
			return nil, fmt.Errorf("has a part of type %q: only text parts are supported", p.Type)
		}
	}
	return mustJSON(strings.Join(texts, "\n")), nil
}

// joinText joins two texts by a newline, either of which may be empty.
func joinText(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n" + b
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // a string cannot fail
	return b
}

// Response is the Responses API's answer object.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *Error             `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Text               responseText       `json:"text"`
	ToolChoice         any                `json:"tool_choice"`
	Tools              []any              `json:"tools"`
	Usage              *ResponseUsage     `json:"usage"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseText struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

// ResponseMessage is an item of a response's output: the assistant's
// message. The calls it made are items of their own
// (responseFunctionCall).
type ResponseMessage struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
}

// ResponseReasoning is an item of a response's output before its message
// or calls: a reasoning model's reasoning, whole, as a reasoning_text part
// of its content (as OpenAI's open-weight models give theirs), with no
// summary.
type ResponseReasoning struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Summary []any           `json:"summary"`
	Content []reasoningPart `json:"content"`
}

type reasoningPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (s ResponseStream) reasoning(status, text string) ResponseReasoning {
	return ResponseReasoning{Type: "reasoning", ID: "rs_" + s.JobID, Status: status, Summary: []any{},
		Content: []reasoningPart{{Type: "reasoning_text", Text: text}}}
}

type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// ResponseUsage counts a response's tokens in the Responses API's words.
type ResponseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// ResponseStream is what a response's objects share: its job, when it
// was created, and the model.
type ResponseStream Stream

func (s ResponseStream) object(status string) Response {
	r := Response{ID: "resp_" + s.JobID, Object: "response", CreatedAt: s.Created, Status: status, Model: s.Model,
		Output: []any{}, ToolChoice: genq.ToolChoiceAuto, Tools: []any{}, ParallelToolCalls: true}
	if e := s.Echo; e != nil {
		r.Tools, r.ToolChoice, r.ParallelToolCalls = e.Tools, e.ToolChoice, e.ParallelToolCalls
	}
	r.Text.Format.Type = "text"
	return r
}

// ToolsEcho is what a response repeats of its request: its tools,
// tool_choice and parallel_tool_calls, as OpenAI's responses do.
type ToolsEcho struct {
	Tools             []any
	ToolChoice        any
	ParallelToolCalls bool
}

// EchoOf is what job's response repeats of its request: its function
// tools in the Responses API's flat shape (a namespace's among them), the
// tools it left out by their type ({"type":"web_search"}), the choice
// ("auto" when it gave none) and whether calls may be several.
func EchoOf(job genq.Job) *ToolsEcho {
	e := &ToolsEcho{Tools: []any{}, ToolChoice: genq.ToolChoiceAuto, ParallelToolCalls: job.Parallel()}
	for _, t := range job.Tools {
		f := t.Function
		params := f.Parameters
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
		e.Tools = append(e.Tools, responseToolOut{Type: "function", Name: f.Name, Description: f.Description, Parameters: params, Strict: f.Strict})
	}
	for _, name := range job.IgnoredTools {
		e.Tools = append(e.Tools, map[string]string{"type": name})
	}
	switch c := job.ToolChoice; {
	case c != nil && c.Function != "":
		e.ToolChoice = map[string]string{"type": "function", "name": c.Function}
	case c != nil:
		e.ToolChoice = c.Mode
	}
	return e
}

// responseToolOut is a function tool as a response repeats it.
type responseToolOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

func (s ResponseStream) message(status, text string) ResponseMessage {
	return ResponseMessage{Type: "message", ID: "msg_" + s.JobID, Status: status, Role: genq.RoleAssistant,
		Content: []responsePart{{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}}}
}

// Done is the response of a finished answer: its message, or the calls it
// made; "incomplete" when the answer reached its token limit, as OpenAI
// says it.
func (s ResponseStream) Done(r genq.TextResult) Response {
	resp := s.object("completed")
	status := "completed"
	if r.FinishReason == genq.FinishLength {
		resp.Status, status = "incomplete", "incomplete"
		resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	if r.Reasoning != "" {
		resp.Output = append(resp.Output, s.reasoning(status, r.Reasoning))
	}
	if len(r.ToolCalls) == 0 {
		resp.Output = append(resp.Output, s.message(status, r.GeneratedText))
	}
	for i, c := range r.ToolCalls {
		resp.Output = append(resp.Output, functionCall(s.JobID, i, c.Function.Name, c.Function.Arguments, status))
	}
	u := &ResponseUsage{}
	if r.Usage != nil {
		u.InputTokens, u.OutputTokens = r.Usage.PromptTokens, r.Usage.CompletionTokens
		u.InputTokensDetails.CachedTokens = r.Usage.CachedTokens
		u.OutputTokensDetails.ReasoningTokens = r.Usage.ReasoningTokens
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	resp.Usage = u
	return resp
}

// ResponseEvent is one event of a streamed response: its type, which is
// also the SSE event's name, and its fields.
type ResponseEvent map[string]any

// Type is the event's type.
func (e ResponseEvent) Type() string { s, _ := e["type"].(string); return s }

// ResponseError is the event that ends a stream that failed.
func ResponseError(err error) ResponseEvent {
	e := ErrorOf(err)
	return ResponseEvent{"type": "error", "code": e.Code, "message": e.Message, "param": nil}
}
