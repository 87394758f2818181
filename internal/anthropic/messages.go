// Package anthropic speaks Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens): it reads a request into a genq chat job and
// writes a job's result as a message, whole or as the API's stream events,
// so that the Anthropic SDKs and the tools built on them (Claude Code
// among them) work against genq unchanged.
//
// The package knows nothing of HTTP or queues, as package openai does not.
package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// Request is a Messages request: what genq reads of it. Fields the API
// has that genq does not read (metadata, service_tier, cache_control on
// blocks) change nothing about an answer genq can give and are ignored;
// those that would (thinking, images, documents, server tools) are refused
// by name.
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []messageIn     `json:"messages"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	MCPServers json.RawMessage `json:"mcp_servers"`
	Container  json.RawMessage `json:"container"`
}

type messageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is one content block of a message, of any type genq reads.
type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// MaxTemperature is the Messages API's bound on temperature.
const MaxTemperature = 1

// Decode reads a Messages request into job, its content at most maxPrompt
// bytes. The params it returns are what the text routes share: the model
// asked for and whether to stream. max_tokens is a bound: above the
// worker's cap the answer stops at the cap (stop_reason "max_tokens"), as
// Anthropic's clients send their whole output budget whatever the model.
func Decode(body []byte, maxPrompt int, job *genq.Job) (openai.Params, error) {
	req, err := decodeRequest(body)
	if err != nil {
		return openai.Params{}, err
	}
	switch {
	case req.MaxTokens == nil:
		return openai.Params{}, genq.Errorf(genq.Invalid, "max_tokens: Field required")
	case *req.MaxTokens < 1:
		return openai.Params{}, genq.Errorf(genq.Invalid, "max_tokens: must be at least 1, not %d", *req.MaxTokens)
	case req.Temperature != nil && !(*req.Temperature >= 0 && *req.Temperature <= MaxTemperature):
		return openai.Params{}, genq.Errorf(genq.Invalid, "temperature: must be between 0 and %d, not %v", MaxTemperature, *req.Temperature)
	}
	if err := req.job(maxPrompt, job); err != nil {
		return openai.Params{}, err
	}
	job.MaxTokens, job.MaxTokensBound = *req.MaxTokens, true
	job.Temperature, job.TopP, job.TopK, job.Stream = req.Temperature, req.TopP, req.TopK, req.Stream
	job.Stop = req.StopSequences
	return openai.Params{Model: req.Model, Stream: req.Stream}, nil
}

// DecodeCount reads a count_tokens request into job: the same fields as a
// message's but max_tokens, which it does not take, and the job asks for
// the count alone.
func DecodeCount(body []byte, maxPrompt int, job *genq.Job) (openai.Params, error) {
	req, err := decodeRequest(body)
	if err != nil {
		return openai.Params{}, err
	}
	if err := req.job(maxPrompt, job); err != nil {
		return openai.Params{}, err
	}
	job.CountOnly, job.MaxTokens = true, 1 // one token where a worker predates CountOnly
	return openai.Params{Model: req.Model}, nil
}

func decodeRequest(body []byte) (Request, error) {
	var req Request
	if err := openai.Decode(body, &req); err != nil {
		return Request{}, err
	}
	switch {
	case req.Thinking != nil && req.Thinking.Type != "disabled":
		return Request{}, genq.Errorf(genq.Invalid, "thinking: extended thinking is not supported by this server; leave thinking out")
	case len(req.MCPServers) > 0 && string(req.MCPServers) != "null" && string(req.MCPServers) != "[]":
		return Request{}, genq.Errorf(genq.Invalid, "mcp_servers: MCP servers are not supported by this server")
	case len(req.Container) > 0 && string(req.Container) != "null":
		return Request{}, genq.Errorf(genq.Invalid, "container: code execution containers are not supported by this server")
	}
	return req, nil
}

// job fills job's chat (system, messages, tools) from r.
func (r Request) job(maxPrompt int, job *genq.Job) error {
	var msgs []genq.Message
	system, err := systemText(r.System)
	if err != nil {
		return err
	}
	if system != "" {
		msgs = append(msgs, genq.Message{Role: genq.RoleSystem, Content: system})
	}
	if len(r.Messages) == 0 {
		return genq.Errorf(genq.Invalid, "messages: Field required: a list of {role, content}")
	}
	size := len(system)
	for i, m := range r.Messages {
		out, err := message(m, fmt.Sprintf("messages.%d", i))
		if err != nil {
			return err
		}
		for _, o := range out {
			size += len(o.Content)
			for _, c := range o.ToolCalls {
				size += len(c.Function.Arguments)
			}
		}
		msgs = append(msgs, out...)
	}
	if size > maxPrompt {
		return genq.Errorf(genq.Invalid, "messages hold %d bytes of content; the limit is %d", size, maxPrompt)
	}
	if err := genq.ValidateMessages(msgs); err != nil {
		return err
	}
	job.Messages = msgs
	tools, err := r.tools()
	if err != nil {
		return err
	}
	job.Tools = tools
	if r.ToolChoice != nil {
		choice, parallel, err := r.ToolChoice.job(tools)
		if err != nil {
			return err
		}
		job.ToolChoice, job.ParallelToolCalls = choice, parallel
	}
	return nil
}

// systemText is system's text: a string, or text blocks.
func systemText(raw json.RawMessage) (string, error) {
	blocks, err := blocksOf(raw, "system")
	if err != nil {
		return "", err
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", genq.Errorf(genq.Invalid, "system.%d.type: system takes text blocks, not %q", i, b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// blocksOf reads content: a string is one text block.
func blocksOf(raw json.RawMessage, at string) ([]block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, genq.Errorf(genq.Invalid, "%s: is not a valid string", at)
		}
		return []block{{Type: "text", Text: text}}, nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, genq.Errorf(genq.Invalid, "%s: must be a string or a list of content blocks", at)
	}
	return blocks, nil
}

// unsupportedBlock names what a block type would need that genq does not
// have, "" for the types it reads.
func unsupportedBlock(t string) string {
	switch t {
	case "text", "tool_use", "tool_result":
		return ""
	case "image":
		return "images are not supported by this server's models"
	case "document", "search_result":
		return "documents are not supported by this server"
	case "thinking", "redacted_thinking":
		return "thinking blocks are not supported by this server"
	}
	return fmt.Sprintf("content blocks of type %q are not supported by this server", t)
}

// message turns one Messages message into the chat's: a user message's
// tool_result blocks become tool messages, before its text; an assistant
// message's tool_use blocks become its tool calls.
func message(m messageIn, at string) ([]genq.Message, error) {
	if m.Role != genq.RoleUser && m.Role != genq.RoleAssistant {
		return nil, genq.Errorf(genq.Invalid, "%s.role: must be \"user\" or \"assistant\", not %q", at, m.Role)
	}
	blocks, err := blocksOf(m.Content, at+".content")
	if err != nil {
		return nil, err
	}
	var out []genq.Message
	var texts []string
	var calls []genq.ToolCall
	for i, b := range blocks {
		bat := fmt.Sprintf("%s.content.%d", at, i)
		if msg := unsupportedBlock(b.Type); msg != "" {
			return nil, genq.Errorf(genq.Invalid, "%s.type: %s", bat, msg)
		}
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "tool_use" && m.Role == genq.RoleAssistant:
			args := "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				if b.Input[0] != '{' {
					return nil, genq.Errorf(genq.Invalid, "%s.input: must be an object", bat)
				}
				args = string(b.Input)
			}
			if b.ID == "" || b.Name == "" {
				return nil, genq.Errorf(genq.Invalid, "%s: a tool_use block needs its id and name", bat)
			}
			calls = append(calls, genq.ToolCall{ID: b.ID, Type: "function", Function: genq.ToolCallFunction{Name: b.Name, Arguments: args}})
		case b.Type == "tool_result" && m.Role == genq.RoleUser:
			if b.ToolUseID == "" {
				return nil, genq.Errorf(genq.Invalid, "%s.tool_use_id: Field required", bat)
			}
			content, err := resultText(b.Content, bat+".content")
			if err != nil {
				return nil, err
			}
			if b.IsError {
				content = "Error: " + content
			}
			out = append(out, genq.Message{Role: genq.RoleTool, Content: content, ToolCallID: b.ToolUseID})
		default:
			return nil, genq.Errorf(genq.Invalid, "%s.type: a %s block belongs in a message of the other role", bat, b.Type)
		}
	}
	if len(texts) > 0 || len(calls) > 0 || len(out) == 0 {
		out = append(out, genq.Message{Role: m.Role, Content: strings.Join(texts, "\n"), ToolCalls: calls})
	}
	return out, nil
}

// resultText is a tool_result's content: a string or text blocks.
func resultText(raw json.RawMessage, at string) (string, error) {
	blocks, err := blocksOf(raw, at)
	if err != nil {
		return "", err
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", genq.Errorf(genq.Invalid, "%s.%d.type: %s", at, i, cmp.Or(unsupportedBlock(b.Type), "a tool result holds text blocks"))
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// tools are the request's tools as genq's: client tools only, their
// input_schema the function's parameters.
func (r Request) tools() ([]genq.Tool, error) {
	out := make([]genq.Tool, 0, len(r.Tools))
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, genq.Errorf(genq.Invalid, "tools.%d.type: server tools (%q) are not supported by this server; give client tools: name, description, input_schema", i, t.Type)
		}
		if t.Name == "" {
			return nil, genq.Errorf(genq.Invalid, "tools.%d.name: Field required", i)
		}
		if len(t.InputSchema) == 0 {
			return nil, genq.Errorf(genq.Invalid, "tools.%d.input_schema: Field required", i)
		}
		out = append(out, genq.Tool{Type: "function", Function: genq.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	return out, nil
}

// job is the tool choice as genq's: auto, any (some tool must be called),
// tool (that one), none; and whether calls may be several.
func (c toolChoice) job(tools []genq.Tool) (*genq.ToolChoice, *bool, error) {
	var choice genq.ToolChoice
	switch c.Type {
	case "auto":
		choice.Mode = genq.ToolChoiceAuto
	case "any":
		choice.Mode = genq.ToolChoiceRequired
	case "none":
		choice.Mode = genq.ToolChoiceNone
	case "tool":
		if c.Name == "" {
			return nil, nil, genq.Errorf(genq.Invalid, "tool_choice.name: Field required for type \"tool\"")
		}
		choice.Function = c.Name
	default:
		return nil, nil, genq.Errorf(genq.Invalid, "tool_choice.type: must be auto, any, tool or none, not %q", c.Type)
	}
	if choice.Mode != genq.ToolChoiceNone && len(tools) == 0 {
		return nil, nil, genq.Errorf(genq.Invalid, "tool_choice: %q asks for a tool, but tools is empty", c.Type)
	}
	var parallel *bool
	if c.DisableParallelToolUse {
		f := false
		parallel = &f
	}
	return &choice, parallel, nil
}
