package textgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/template"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
)

// RenderChat renders a chat as RenderMessages does, with the tools the
// answer may call and the turns of earlier calls. A template that renders
// tools itself gets them as ollama's template values; any other gets the
// conversation rendered the Llama 3.1 way (llama31Messages), the format
// the tool grammar holds the answer to.
func (c *chatTemplate) RenderChat(system string, msgs []genq.Message, tools []genq.Tool) (string, error) {
	all := make([]api.Message, 0, len(msgs)+2)
	if len(msgs) == 0 || msgs[0].Role != genq.RoleSystem {
		all = append(all, api.Message{Role: genq.RoleSystem, Content: strings.TrimSpace(system)})
	}
	values := template.Values{}
	if c.rendersTools {
		turns, err := apiMessages(msgs)
		if err != nil {
			return "", err
		}
		all = append(all, turns...)
		if values.Tools, err = apiTools(tools); err != nil {
			return "", err
		}
	} else {
		turns, err := llama31Messages(msgs, tools)
		if err != nil {
			return "", err
		}
		all = append(all, turns...)
	}
	values.Messages = all
	var b strings.Builder
	if err := c.tmpl.Execute(&b, values); err != nil {
		return "", fmt.Errorf("render chat template %s: %w", c.name, err)
	}
	return b.String(), nil
}

// Meta's guidance for custom tools, as the Llama 3.1 template writes it
// into the first user message, its missing space included.
const llama31ToolGuidance = "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
	`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.` +
	"Do not use variables.\n\n"

// roleIPython is the role of a tool's result in Llama 3.1's conversations.
const roleIPython = "ipython"

// llama31Messages is a conversation as Llama 3.1's template gives it to
// the model: the tools' definitions (JSON, indented by four) after Meta's
// guidance, in the first user message; an assistant's earlier calls as the
// model writes them (structured.FormatToolCalls); a tool's result as an
// ipython turn. Each message's content is trimmed, as Meta's template
// trims it. A chat with tools and no user message gets the definitions in
// a user turn of their own, at its end.
func llama31Messages(msgs []genq.Message, tools []genq.Tool) ([]api.Message, error) {
	preamble := ""
	if len(tools) > 0 {
		var b strings.Builder
		b.WriteString(llama31ToolGuidance)
		for i, t := range tools {
			def, err := indentedJSON(t)
			if err != nil {
				return nil, genq.WrapError(genq.Invalid, err, fmt.Sprintf("tools[%d]: %v", i, err))
			}
			b.Write(def)
			b.WriteString("\n\n")
		}
		preamble = b.String()
	}
	out := make([]api.Message, 0, len(msgs)+1)
	for _, m := range msgs {
		role, content := m.Role, strings.TrimSpace(m.Content)
		switch {
		case m.Role == genq.RoleTool:
			role = roleIPython
		case m.Role == genq.RoleAssistant && len(m.ToolCalls) > 0:
			content = structured.FormatToolCalls(m.ToolCalls)
		case m.Role == genq.RoleUser && preamble != "":
			content, preamble = preamble+content, ""
		}
		out = append(out, api.Message{Role: role, Content: content})
	}
	if preamble != "" {
		out = append(out, api.Message{Role: genq.RoleUser, Content: strings.TrimSpace(preamble)})
	}
	return out, nil
}

// indentedJSON writes v as Jinja's tojson(indent=4) does: keys in their
// order, non-ASCII and HTML characters as they are.
func indentedJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// apiMessages is the conversation as ollama's template values hold it, for
// a template that renders calls and tool turns itself.
func apiMessages(msgs []genq.Message) ([]api.Message, error) {
	out := make([]api.Message, 0, len(msgs))
	for i, m := range msgs {
		am := api.Message{Role: m.Role, Content: strings.TrimSpace(m.Content), ToolCallID: m.ToolCallID}
		for j, c := range m.ToolCalls {
			call := api.ToolCall{ID: c.ID}
			call.Function.Index, call.Function.Name = j, c.Function.Name
			if args := strings.TrimSpace(c.Function.Arguments); args != "" {
				if err := json.Unmarshal([]byte(args), &call.Function.Arguments); err != nil {
					return nil, genq.WrapError(genq.Invalid, err,
						fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments is not a JSON object: %v", i, j, err))
				}
			}
			am.ToolCalls = append(am.ToolCalls, call)
		}
		out = append(out, am)
	}
	return out, nil
}

// apiTools is the tools as ollama's template values hold them.
func apiTools(tools []genq.Tool) (api.Tools, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, genq.WrapError(genq.Invalid, err, fmt.Sprintf("tools: %v", err))
	}
	var out api.Tools
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, genq.WrapError(genq.Invalid, err, fmt.Sprintf("tools: a definition the chat template cannot take: %v", err))
	}
	return out, nil
}
