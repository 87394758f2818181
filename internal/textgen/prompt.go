package textgen

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ollama/ollama/template"

	"github.com/genq/genq/internal/genq"
)

// chatTemplate renders a conversation with the model's own chat template.
type chatTemplate struct {
	name string
	tmpl *template.Template
	// rendersTools is set when the template renders tool definitions
	// itself (it reads .Tools); otherwise they are rendered into the
	// conversation the Llama 3.1 way (prompt_tools.go).
	rendersTools bool
}

// newChatTemplate maps the model's jinja chat template (GGUF
// tokenizer.chat_template) to the ollama Go template that renders the same
// text. Go cannot run jinja, so a model whose template matches none of
// ollama's known ones cannot be served.
func newChatTemplate(jinja string) (*chatTemplate, error) {
	if strings.TrimSpace(jinja) == "" {
		return nil, errors.New("the model has no chat template (GGUF key tokenizer.chat_template)")
	}
	named, err := template.Named(jinja)
	if err != nil {
		return nil, fmt.Errorf("the model's chat template matches no known template: %w", err)
	}
	t, err := template.Parse(string(named.Bytes))
	if err != nil {
		return nil, fmt.Errorf("chat template %s: %w", named.Name, err)
	}
	return newParsedTemplate(named.Name, t), nil
}

// newParsedTemplate wraps a parsed template, noting whether it renders
// tools. A template whose variables cannot be listed renders chats as
// before, and tools the Llama 3.1 way.
func newParsedTemplate(name string, t *template.Template) *chatTemplate {
	vars, err := t.Vars()
	return &chatTemplate{name: name, tmpl: t, rendersTools: err == nil && slices.Contains(vars, "tools")}
}

// Render returns the prompt text up to and including the generation prompt
// (the assistant header). It adds no BOS: the tokenizer does.
func (c *chatTemplate) Render(system, user string) (string, error) {
	return c.RenderMessages(system, []genq.Message{{Role: genq.RoleUser, Content: user}})
}

// RenderMessages renders a chat of any number of turns, the way Render
// renders one: the system message goes first unless the chat opens with its
// own, and the text ends with the assistant's header.
func (c *chatTemplate) RenderMessages(system string, msgs []genq.Message) (string, error) {
	return c.RenderChat(system, msgs, nil)
}
