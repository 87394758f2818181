package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Params
	Messages    []chatMessageIn `json:"messages"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs int             `json:"top_logprobs"`
	// WebSearchOptions asks for OpenAI's hosted web search, which genq
	// does not have: the answer says it was left out.
	WebSearchOptions json.RawMessage `json:"web_search_options"`
	// ReasoningEffort is how much a reasoning model thinks: "none" not at
	// all; any other effort lets it think within its default budget.
	ReasoningEffort string `json:"reasoning_effort"`
}

// thinkingOf is a reasoning effort as a job's thinking: nil when the
// request gives none (the worker's default: a model that reasons does),
// off for "none", on for the others.
func thinkingOf(effort, field string) (*genq.Thinking, error) {
	switch effort {
	case "":
		return nil, nil
	case "none":
		return &genq.Thinking{}, nil
	case "minimal", "low", "medium", "high", "xhigh":
		return &genq.Thinking{Enabled: true, Effort: effort}, nil
	}
	return nil, genq.Errorf(genq.Invalid, `%s %q is not one of "none", "minimal", "low", "medium", "high" and "xhigh"`, field, effort)
}

type chatMessageIn struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []genq.ToolCall `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ReasoningContent is an earlier answer's reasoning sent back, as
	// reasoning models' clients send it (DeepSeek's, vLLM's field).
	ReasoningContent string `json:"reasoning_content"`
}

// DecodeChat reads the body of a chat into job, its messages at most
// maxPrompt bytes of content.
func DecodeChat(body []byte, maxPrompt int, job *genq.Job) (Params, error) {
	var req ChatRequest
	if err := Decode(body, &req); err != nil {
		return Params{}, err
	}
	if req.Echo {
		return Params{}, genq.Errorf(genq.Invalid, "echo is for /v1/completions: a chat answer does not repeat its messages")
	}
	msgs, err := messages(req.Messages, maxPrompt)
	if err != nil {
		return Params{}, err
	}
	job.Messages = msgs
	job.Logprobs, job.TopLogprobs = req.Logprobs, req.TopLogprobs
	if job.Thinking, err = thinkingOf(req.ReasoningEffort, "reasoning_effort"); err != nil {
		return req.Params, err
	}
	if err := req.fill(job); err != nil {
		return req.Params, err
	}
	return req.Params, req.hostedTools(job)
}

// hostedTools leaves out of job the tools genq cannot run, which a chat
// may ask for beside its functions (custom tools of free text; hosted web
// search, by web_search_options), and names them in job.IgnoredTools.
func (r ChatRequest) hostedTools(job *genq.Job) error {
	var tools []genq.Tool
	for _, t := range job.Tools {
		if t.Type == "function" || t.Type == "" { // an untyped tool is refused as it was
			tools = append(tools, t)
		} else {
			job.IgnoredTools = append(job.IgnoredTools, t.Type)
		}
	}
	if len(r.WebSearchOptions) > 0 && string(r.WebSearchOptions) != "null" {
		job.IgnoredTools = append(job.IgnoredTools, "web_search")
	}
	if len(job.IgnoredTools) == 0 {
		return nil
	}
	job.Tools = tools
	choice, err := choiceOf(job.ToolChoice, tools, job.IgnoredTools)
	if err != nil {
		return err
	}
	job.ToolChoice = choice
	if len(tools) == 0 {
		job.ParallelToolCalls = nil
	}
	return nil
}

// messages turns a chat's messages into the job's. Content is a string, or
// a list of text parts, as OpenAI's API allows; "developer" is the newer
// name of "system".
func messages(in []chatMessageIn, maxPrompt int) ([]genq.Message, error) {
	if len(in) == 0 {
		return nil, genq.Errorf(genq.Invalid, "messages is required: a list of {role, content}")
	}
	out := make([]genq.Message, len(in))
	size := 0
	for i, m := range in {
		role := m.Role
		if role == "developer" {
			role = genq.RoleSystem
		}
		content, err := contentText(m.Content)
		if err != nil {
			return nil, genq.Errorf(genq.Invalid, "messages[%d].content %s", i, err.Error())
		}
		size += len(content)
		out[i] = genq.Message{Role: role, Content: content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if role == genq.RoleAssistant {
			out[i].ReasoningContent = m.ReasoningContent
			size += len(m.ReasoningContent)
		}
	}
	if size > maxPrompt {
		return nil, genq.Errorf(genq.Invalid, "messages hold %d bytes of content; the limit is %d", size, maxPrompt)
	}
	return out, genq.ValidateMessages(out)
}

func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", errors.New("is not a valid string")
		}
		return text, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or a list of text parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("has a part of type %q: only text parts are supported", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// ChatCompletion is a chat's answer.
type ChatCompletion = answerFrame[chatChoice]

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

// chatMessageOut is the answer's message: its content, or null and the
// tool calls it made, as OpenAI gives them.
type chatMessageOut struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is a reasoning model's reasoning, before its
	// content or calls: the field DeepSeek's API, vLLM and llama.cpp's
	// server give it in.
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []genq.ToolCall `json:"tool_calls,omitempty"`
}

// RenderChat is the chat answer of a request's choices, in order.
func RenderChat(results ...TextResult) ChatCompletion {
	first := results[0]
	c := ChatCompletion{ID: "chatcmpl-" + first.JobID, Object: "chat.completion", Created: first.Created, Model: first.Model,
		Usage: ChoicesUsage(results)}
	for i, r := range results {
		msg := chatMessageOut{Role: genq.RoleAssistant, ToolCalls: r.ToolCalls}
		if len(r.ToolCalls) == 0 {
			msg.Content = &r.GeneratedText
		}
		if r.Reasoning != "" {
			msg.ReasoningContent = &r.Reasoning
		}
		c.Choices = append(c.Choices, chatChoice{Index: i, Message: msg,
			Logprobs: chatLogprobsOf(r.logprobEntries()), FinishReason: r.FinishReason})
	}
	return c
}

// ChatCompletionChunk is one event of a streamed chat.
type ChatCompletionChunk = chunkFrame[chatChunkChoice]

// chatChunkChoice is a chat choice in a stream. Log-probabilities, when
// asked for, come with the text of their tokens.
type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Content          string          `json:"content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

// toolCallDelta is a piece of a streamed tool call: the first names the
// call's id and function, the next carry pieces of its arguments.
type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolFunctionDelta `json:"function"`
}

type toolFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatChunks builds the chunks of one streamed chat. A choice whose job
// offers tools is read as it comes (toolcall.CallStream), and the calls
// it makes go out as delta.tool_calls.
type ChatChunks struct {
	Stream
	jobIDs []string
	calls  []*toolcall.CallStream // by choice; nil for a choice without tools
	held   [][]genq.TokenLogprob  // by choice: of pieces that gave no chunk yet
}

// NewChatChunks builds the chunks of a chat streamed by jobs, a job per
// choice.
func NewChatChunks(s Stream, jobs []genq.Job) *ChatChunks {
	c := &ChatChunks{Stream: s, jobIDs: make([]string, len(jobs)), calls: make([]*toolcall.CallStream, len(jobs)),
		held: make([][]genq.TokenLogprob, len(jobs))}
	for i, j := range jobs {
		c.jobIDs[i] = j.ID
		if mode := j.ToolMode(); mode != "" {
			c.calls[i] = toolcall.NewCallStream(mode == genq.ToolChoiceAuto)
		}
	}
	return c
}

func (s *ChatChunks) object(choices []chatChunkChoice, usage *Usage) ChatCompletionChunk {
	return ChatCompletionChunk{ID: "chatcmpl-" + s.JobID, Object: "chat.completion.chunk", Created: s.Created,
		Model: s.Model, Choices: choices, Usage: usage}
}

// Piece carries a piece of choice index's text, and of its reasoning as
// delta.reasoning_content; a choice's first chunk names the role. A piece
// that says nothing yet (the start of a tool call whose name is still
// coming) gives nil: no chunk.
func (s *ChatChunks) Piece(index int, _ string, piece genq.TextPiece, first bool) any {
	if s.calls[index] == nil {
		return s.choice(index, chatDelta{ReasoningContent: piece.Reasoning, Content: piece.Text}, piece.Logprobs, "", first)
	}
	delta := s.delta(index, s.calls[index].Write(piece.Text))
	delta.ReasoningContent = piece.Reasoning
	s.held[index] = append(s.held[index], piece.Logprobs...)
	if delta.Content == "" && len(delta.ToolCalls) == 0 && delta.ReasoningContent == "" {
		return nil
	}
	logprobs := s.held[index]
	s.held[index] = nil
	return s.choice(index, delta, logprobs, "", first)
}

// Finish ends choice index with its finish reason, and what was held back
// of its tool calls.
func (s *ChatChunks) Finish(index int, reason string, first bool) any {
	var delta chatDelta
	if s.calls[index] != nil {
		delta = s.delta(index, s.calls[index].Close())
	}
	return s.choice(index, delta, nil, reason, first)
}

// delta is the chat delta of a choice's call events. A reasoning block
// before the calls goes out in no delta, as the final message, whose content
// is null when it made calls, holds none.
func (s *ChatChunks) delta(index int, events []toolcall.CallEvent) chatDelta {
	var d chatDelta
	for _, e := range events {
		d.Content += e.Content
		switch {
		case e.Start:
			d.ToolCalls = append(d.ToolCalls, toolCallDelta{Index: e.Index, ID: genq.ToolCallID(s.jobIDs[index], e.Index), Type: "function",
				Function: toolFunctionDelta{Name: e.Name}})
		case e.Arguments != "":
			if n := len(d.ToolCalls); n > 0 && d.ToolCalls[n-1].Index == e.Index {
				d.ToolCalls[n-1].Function.Arguments += e.Arguments
			} else {
				d.ToolCalls = append(d.ToolCalls, toolCallDelta{Index: e.Index, Function: toolFunctionDelta{Arguments: e.Arguments}})
			}
		}
	}
	return d
}

func (s *ChatChunks) choice(index int, delta chatDelta, logprobs []genq.TokenLogprob, finish string, first bool) ChatCompletionChunk {
	choice := chatChunkChoice{Index: index, Delta: delta}
	if s.Logprobs && finish == "" {
		choice.Logprobs = chatLogprobsOf(orEmpty(logprobs))
	}
	if first {
		choice.Delta.Role = genq.RoleAssistant
	}
	if finish != "" {
		choice.FinishReason = &finish
	}
	return s.object([]chatChunkChoice{choice}, nil)
}

// Usage is the stream's last chunk before [DONE], when asked for: no
// choice, the token counts.
func (s *ChatChunks) Usage(u Usage) any {
	return s.object([]chatChunkChoice{}, &u)
}
