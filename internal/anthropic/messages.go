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
	"slices"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// Request is a Messages request: what genq reads of it. Fields the API
// has that genq does not read (metadata, service_tier, cache_control on
// blocks, output_config.effort) change nothing about an answer genq can
// give and are ignored; those that would (images, documents, MCP servers)
// are refused by name. Server tools and Anthropic-defined client tools
// are left out of the prompt and named (Job.IgnoredTools), unless
// tool_choice forces one.
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
	Thinking      *thinking       `json:"thinking"`
	OutputConfig  *struct {
		Format *outputFormat `json:"format"`
	} `json:"output_config"`
	OutputFormat *outputFormat   `json:"output_format"` // the beta's name of output_config.format
	MCPServers   json.RawMessage `json:"mcp_servers"`
	Container    json.RawMessage `json:"container"`
	// KeepAlive is Ollama's, read here as on OpenAI's routes: one
	// catalogue serves both APIs, so either may keep a model loaded.
	KeepAlive genq.KeepAliveParam `json:"keep_alive"`
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
	// thinking: an earlier answer's reasoning and its signature
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
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
	Strict      *bool           `json:"strict"`
}

// thinking is the request's extended thinking: "enabled" with a budget
// of tokens, "adaptive" (the model decides how much), or "disabled".
type thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// MinThinkingBudget is the API's least budget_tokens.
const MinThinkingBudget = 1024

// outputFormat is output_config.format: the answer's text is JSON that
// schema accepts.
type outputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
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
	if t := req.Thinking; t != nil && t.Type == "enabled" && *t.BudgetTokens >= *req.MaxTokens {
		return openai.Params{}, genq.Errorf(genq.Invalid, "`max_tokens` must be greater than `thinking.budget_tokens`")
	}
	if err := req.job(maxPrompt, job); err != nil {
		return openai.Params{}, err
	}
	job.MaxTokens, job.MaxTokensBound = *req.MaxTokens, true
	job.Temperature, job.TopP, job.TopK, job.Stream = req.Temperature, req.TopP, req.TopK, req.Stream
	job.Stop = req.StopSequences
	return openai.Params{Model: req.Model, Stream: req.Stream, KeepAlive: req.KeepAlive}, nil
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
	if err := req.Thinking.check(); err != nil {
		return Request{}, err
	}
	switch {
	case len(req.MCPServers) > 0 && string(req.MCPServers) != "null" && string(req.MCPServers) != "[]":
		return Request{}, genq.Errorf(genq.Invalid, "mcp_servers: MCP servers are not supported by this server")
	case len(req.Container) > 0 && string(req.Container) != "null":
		return Request{}, genq.Errorf(genq.Invalid, "container: code execution containers are not supported by this server")
	}
	return req, nil
}

// check refuses a thinking the API would, in its words.
func (t *thinking) check() error {
	if t == nil {
		return nil
	}
	switch t.Type {
	case "enabled":
		switch {
		case t.BudgetTokens == nil:
			return genq.Errorf(genq.Invalid, "thinking.enabled.budget_tokens: Field required")
		case *t.BudgetTokens < MinThinkingBudget:
			return genq.Errorf(genq.Invalid, "thinking.enabled.budget_tokens: Input should be greater than or equal to %d", MinThinkingBudget)
		}
	case "adaptive", "disabled":
	case "":
		return genq.Errorf(genq.Invalid, "thinking.type: Field required")
	default:
		return genq.Errorf(genq.Invalid, "thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'", t.Type)
	}
	return nil
}

// job is the thinking as a job's: on ("enabled", with its budget, or
// "adaptive") or off.
func (t *thinking) job() *genq.Thinking {
	switch {
	case t == nil:
		return nil
	case t.Type == "enabled":
		return &genq.Thinking{Enabled: true, BudgetTokens: *t.BudgetTokens}
	}
	return &genq.Thinking{Enabled: t.Type == "adaptive"}
}

// format is the answer's response format: output_config.format, or the
// beta's output_format; nil when neither is given.
func (r Request) format() (*genq.ResponseFormat, error) {
	f, at := r.OutputFormat, "output_format"
	if r.OutputConfig != nil && r.OutputConfig.Format != nil {
		if f != nil {
			return nil, genq.Errorf(genq.Invalid, "output_format: is the deprecated name of output_config.format: give one of them")
		}
		f, at = r.OutputConfig.Format, "output_config.format"
	}
	switch {
	case f == nil:
		return nil, nil
	case f.Type != genq.FormatJSONSchema:
		return nil, genq.Errorf(genq.Invalid, "%s: Input tag '%s' found using 'type' does not match any of the expected tags: 'json_schema'", at, f.Type)
	case len(f.Schema) == 0 || string(f.Schema) == "null":
		return nil, genq.Errorf(genq.Invalid, "%s.schema: Field required", at)
	}
	// The API's structured outputs are always strict: objects closed to
	// properties they do not list.
	strict := true
	return &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{Name: "output", Schema: f.Schema, Strict: &strict}}, nil
}

// job fills job's chat (system, messages, tools), its response format
// and its thinking from r.
func (r Request) job(maxPrompt int, job *genq.Job) error {
	var msgs []genq.Message
	system, err := systemText(r.System, "system")
	if err != nil {
		return err
	}
	if len(r.Messages) == 0 {
		return genq.Errorf(genq.Invalid, "messages: Field required: a list of {role, content}")
	}
	// System messages before the first turn join the system prompt; later
	// ones stay where they are (mid-conversation system messages), for the
	// worker's template to render there or fold into the system prompt.
	lead := 0
	for ; lead < len(r.Messages) && r.Messages[lead].Role == genq.RoleSystem; lead++ {
		text, err := systemText(r.Messages[lead].Content, fmt.Sprintf("messages.%d.content", lead))
		if err != nil {
			return err
		}
		system = joinNonEmpty(system, text)
	}
	if system != "" {
		msgs = append(msgs, genq.Message{Role: genq.RoleSystem, Content: system})
	}
	size := len(system)
	for i, m := range r.Messages[lead:] {
		out, err := message(m, fmt.Sprintf("messages.%d", lead+i))
		if err != nil {
			return err
		}
		for _, o := range out {
			size += len(o.Content) + len(o.ReasoningContent)
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
	job.Thinking = r.Thinking.job()
	tools, ignored, err := r.tools()
	if err != nil {
		return err
	}
	job.Tools, job.IgnoredTools = tools, ignored
	if r.ToolChoice != nil {
		choice, parallel, err := r.ToolChoice.job(tools, ignored)
		if err != nil {
			return err
		}
		job.ToolChoice, job.ParallelToolCalls = choice, parallel
	}
	if job.ResponseFormat, err = r.format(); err != nil {
		return err
	}
	if job.ResponseFormat != nil && job.ToolMode() != "" {
		return genq.Errorf(genq.Invalid, "output_config.format: this server cannot hold one answer to both a JSON schema and tools: drop the tools or send tool_choice {\"type\": \"none\"}")
	}
	return nil
}

// joinNonEmpty joins two texts by a blank line, either of which may be
// empty.
func joinNonEmpty(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n\n" + b
}

// systemText is a system prompt's text, at at: a string, or text blocks.
func systemText(raw json.RawMessage, at string) (string, error) {
	blocks, err := blocksOf(raw, at)
	if err != nil {
		return "", err
	}
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", genq.Errorf(genq.Invalid, "%s.%d.type: a system prompt takes text blocks, not %q", at, i, b.Type)
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
	case "text", "tool_use", "tool_result", "thinking", "redacted_thinking":
		return ""
	case "image":
		return "images are not supported by this server's models"
	case "document", "search_result":
		return "documents are not supported by this server"
	}
	return fmt.Sprintf("content blocks of type %q are not supported by this server", t)
}

// message turns one Messages message into the chat's: a user message's
// tool_result blocks become tool messages, before its text; an assistant
// message's tool_use blocks become its tool calls, and its thinking
// blocks (an earlier answer's reasoning, sent back, whatever its
// signature) its reasoning, which the worker gives a template that reads
// it (Qwen3's keeps it after the last user turn, as it would have
// written it) and drops for others; redacted_thinking blocks, which hold
// no text, are dropped. A system message is one of the chat's.
func message(m messageIn, at string) ([]genq.Message, error) {
	switch m.Role {
	case genq.RoleUser, genq.RoleAssistant:
	case genq.RoleSystem:
		text, err := systemText(m.Content, at+".content")
		if err != nil {
			return nil, err
		}
		return []genq.Message{{Role: genq.RoleSystem, Content: text}}, nil
	default:
		return nil, genq.Errorf(genq.Invalid, "%s.role: Input should be 'user', 'assistant' or 'system'", at)
	}
	blocks, err := blocksOf(m.Content, at+".content")
	if err != nil {
		return nil, err
	}
	var out []genq.Message
	var texts, thoughts []string
	var calls []genq.ToolCall
	for i, b := range blocks {
		bat := fmt.Sprintf("%s.content.%d", at, i)
		if msg := unsupportedBlock(b.Type); msg != "" {
			return nil, genq.Errorf(genq.Invalid, "%s.type: %s", bat, msg)
		}
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "thinking" && m.Role == genq.RoleAssistant:
			if b.Thinking != "" {
				thoughts = append(thoughts, b.Thinking)
			}
		case b.Type == "redacted_thinking" && m.Role == genq.RoleAssistant:
			// dropped: reasoning no model of genq's can read
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
		out = append(out, genq.Message{Role: m.Role, Content: strings.Join(texts, "\n"), ToolCalls: calls,
			ReasoningContent: strings.Join(thoughts, "\n")})
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

// tools are the request's tools as genq's: custom client tools, their
// input_schema the function's parameters. The others, server tools
// (web_search_…, code_execution_…) and the client tools whose definition
// is Anthropic's (bash_…, text_editor_…, computer_…), are left out, and
// ignored names them.
func (r Request) tools() (tools []genq.Tool, ignored []string, err error) {
	out := make([]genq.Tool, 0, len(r.Tools))
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			ignored = append(ignored, cmp.Or(t.Name, t.Type))
			continue
		}
		if t.Name == "" {
			return nil, nil, genq.Errorf(genq.Invalid, "tools.%d.name: Field required", i)
		}
		if len(t.InputSchema) == 0 {
			return nil, nil, genq.Errorf(genq.Invalid, "tools.%d.input_schema: Field required", i)
		}
		out = append(out, genq.Tool{Type: "function", Function: genq.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict}})
	}
	return out, ignored, nil
}

// job is the tool choice as genq's: auto, any (some tool must be called),
// tool (that one), none; and whether calls may be several. A choice that
// forces a tool genq left out (ignored) is refused, naming it; one that
// forces none is dropped when every tool was left out.
func (c toolChoice) job(tools []genq.Tool, ignored []string) (*genq.ToolChoice, *bool, error) {
	switch {
	case c.Type == "tool" && slices.Contains(ignored, c.Name):
		return nil, nil, genq.Errorf(genq.Invalid, "tool_choice.name: %q is a server tool or an Anthropic-defined client tool, which this server cannot offer; give a custom tool (name, description, input_schema)", c.Name)
	case c.Type == "any" && len(tools) == 0 && len(ignored) > 0:
		return nil, nil, genq.Errorf(genq.Invalid, "tool_choice: \"any\" forces a tool, and this server can offer none of these (%s): give custom tools (name, description, input_schema)", strings.Join(ignored, ", "))
	case (c.Type == "auto" || c.Type == "none") && len(tools) == 0 && len(ignored) > 0:
		return nil, nil, nil
	}
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
