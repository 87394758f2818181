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

	// Read only to refuse them: genq keeps no conversation, constrains no
	// answer and calls no tool.
	Store              *bool           `json:"store"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	Tools      []any           `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// responseItem is one item of a request's input: a message, its content a
// string or a list of text parts.
type responseItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
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
	return Params{Model: req.Model, Stream: req.Stream}, nil
}

// unsupported names the first thing req asks for that a stateless server
// without structured output cannot give; "" when there is none.
func (r ResponseRequest) unsupported() string {
	switch {
	case r.Store != nil && *r.Store:
		return "store: true is not supported: this server keeps no conversation state; send store: false (or leave it out) and the whole conversation in input"
	case r.PreviousResponseID != "":
		return "previous_response_id is not supported: this server keeps no conversation state; send the whole conversation in input"
	case len(r.Conversation) > 0 && string(r.Conversation) != "null":
		return "conversation is not supported: this server keeps no conversation state; send the whole conversation in input"
	case len(r.Tools) > 0 && string(r.ToolChoice) != `"none"`:
		return "tools are not supported: this server's models answer in text and call no tools; leave tools out, or send tool_choice: none"
	case r.Text != nil && r.Text.Format != nil && r.Text.Format.Type != "" && r.Text.Format.Type != "text":
		return fmt.Sprintf("text.format %q is not supported: this server does not constrain answers to JSON; ask for JSON in the prompt and leave text.format out", r.Text.Format.Type)
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
	out := make([]chatMessageIn, len(items))
	for i, it := range items {
		if it.Type != "" && it.Type != "message" {
			return nil, genq.Errorf(genq.Invalid, "input[%d] is of type %q: only messages are supported", i, it.Type)
		}
		content, err := responseContent(it.Content)
		if err != nil {
			return nil, genq.Errorf(genq.Invalid, "input[%d].content %s", i, err.Error())
		}
		out[i] = chatMessageIn{Role: it.Role, Content: content}
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
	Output             []ResponseMessage  `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Text               responseText       `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
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

// ResponseMessage is the one item of a response's output: the assistant's
// message.
type ResponseMessage struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
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
		Output: []ResponseMessage{}, ToolChoice: "none", Tools: []any{}}
	r.Text.Format.Type = "text"
	return r
}

func (s ResponseStream) message(status, text string) ResponseMessage {
	return ResponseMessage{Type: "message", ID: "msg_" + s.JobID, Status: status, Role: genq.RoleAssistant,
		Content: []responsePart{{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}}}
}

// Done is the response of a finished answer: "incomplete" when the
// answer reached its token limit, as OpenAI says it.
func (s ResponseStream) Done(r genq.TextResult) Response {
	resp := s.object("completed")
	status := "completed"
	if r.FinishReason == genq.FinishLength {
		resp.Status, status = "incomplete", "incomplete"
		resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	resp.Output = []ResponseMessage{s.message(status, r.GeneratedText)}
	u := &ResponseUsage{}
	if r.Usage != nil {
		u.InputTokens, u.OutputTokens = r.Usage.PromptTokens, r.Usage.CompletionTokens
		u.InputTokensDetails.CachedTokens = r.Usage.CachedTokens
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

// Start are the events that open a stream: the response created and in
// progress, its message and its text part added.
func (s ResponseStream) Start() []ResponseEvent {
	resp := s.object("in_progress")
	msg := s.message("in_progress", "")
	msg.Content = []responsePart{}
	return []ResponseEvent{
		{"type": "response.created", "response": resp},
		{"type": "response.in_progress", "response": resp},
		{"type": "response.output_item.added", "output_index": 0, "item": msg},
		{"type": "response.content_part.added", "item_id": msg.ID, "output_index": 0, "content_index": 0,
			"part": responsePart{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}},
	}
}

// Delta carries a piece of the answer's text.
func (s ResponseStream) Delta(text string) ResponseEvent {
	return ResponseEvent{"type": "response.output_text.delta", "item_id": "msg_" + s.JobID, "output_index": 0,
		"content_index": 0, "delta": text, "logprobs": []any{}}
}

// End are the events that close a stream: the text, its part and its
// message done, then the whole response, "response.completed" or, at the
// token limit, "response.incomplete".
func (s ResponseStream) End(r genq.TextResult) []ResponseEvent {
	resp := s.Done(r)
	msg := resp.Output[0]
	last := "response.completed"
	if resp.Status == "incomplete" {
		last = "response.incomplete"
	}
	return []ResponseEvent{
		{"type": "response.output_text.done", "item_id": msg.ID, "output_index": 0, "content_index": 0,
			"text": r.GeneratedText, "logprobs": []any{}},
		{"type": "response.content_part.done", "item_id": msg.ID, "output_index": 0, "content_index": 0, "part": msg.Content[0]},
		{"type": "response.output_item.done", "output_index": 0, "item": msg},
		{"type": last, "response": resp},
	}
}

// ResponseError is the event that ends a stream that failed.
func ResponseError(err error) ResponseEvent {
	e := ErrorOf(err)
	return ResponseEvent{"type": "error", "code": e.Code, "message": e.Message, "param": nil}
}
