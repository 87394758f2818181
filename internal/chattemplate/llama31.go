package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// Meta's guidance for custom tools, as the Llama 3.1 template writes it
// into the first user message, its missing space included.
const llama31ToolGuidance = "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
	`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.` +
	"Do not use variables.\n\n"

// llama31Messages is a conversation as Llama 3.1's template gives it to the
// model, for a template that does not render tools itself (Meta's Llama 3
// template, the tiny test models'): the tools' definitions (JSON, indented
// by four) after Meta's guidance, in the first user message; an assistant's
// earlier calls as the model writes them (toolcall.Llama3JSON); a tool's
// result as a turn of role ipython (Meta's; "user" for a template that has
// no such role). Each message's content is trimmed, as Meta's template
// trims it. A chat with tools and no user message gets the definitions in
// a user turn of their own, at its end.
func llama31Messages(msgs []genq.Message, tools []genq.Tool, ipython string) ([]genq.Message, error) {
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
	out := make([]genq.Message, 0, len(msgs)+1)
	for _, m := range msgs {
		role, content := m.Role, strings.TrimSpace(m.Content)
		switch {
		case m.Role == genq.RoleTool:
			role = ipython
		case m.Role == genq.RoleAssistant && len(m.ToolCalls) > 0:
			content = toolcall.Llama3JSON.Write(m.ToolCalls)
		case m.Role == genq.RoleUser && preamble != "":
			content, preamble = preamble+content, ""
		}
		out = append(out, genq.Message{Role: role, Content: content})
	}
	if preamble != "" {
		out = append(out, genq.Message{Role: genq.RoleUser, Content: strings.TrimSpace(preamble)})
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
