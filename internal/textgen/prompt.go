package textgen

import (
	"strings"

	"github.com/genq/genq/internal/chattemplate"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/llamacpp"
)

// newChatTemplate compiles the model's own Jinja chat template (GGUF
// tokenizer.chat_template), told what the vocabulary says of its BOS and
// EOS, as llama.cpp's server tells it.
func newChatTemplate(source string, v *llamacpp.Vocab) (*chattemplate.Template, error) {
	special := chattemplate.SpecialTokens{AddBOS: v.AddBOS, AddEOS: v.AddEOS}
	if v.BOS >= 0 {
		special.BOS = string(v.Text(v.BOS))
	}
	if v.EOS >= 0 {
		special.EOS = string(v.Text(v.EOS))
	}
	return chattemplate.New(source, special)
}

// renderChat renders a conversation with the model's template, the tools
// the answer may call, and the generation prompt: the worker's system
// prompt goes first unless the chat opens with its own.
func (b *Backend) renderChat(msgs []genq.Message, tools []genq.Tool) (string, error) {
	if len(msgs) == 0 || msgs[0].Role != genq.RoleSystem {
		msgs = append([]genq.Message{{Role: genq.RoleSystem, Content: strings.TrimSpace(b.cfg.SystemPrompt)}}, msgs...)
	}
	return b.tmpl.Render(msgs, tools)
}

// renderChatThinking is renderChat, with enable_thinking for a model
// that reasons set to whether the job thinks (reasoning.go).
func (b *Backend) renderChatThinking(msgs []genq.Message, tools []genq.Tool, thinks bool) (string, error) {
	return b.renderChatReasoning(msgs, tools, thinks, "")
}

// renderChatReasoning is renderChatThinking with the reasoning effort a
// harmony template takes (harmonyEffort).
func (b *Backend) renderChatReasoning(msgs []genq.Message, tools []genq.Tool, thinks bool, effort string) (string, error) {
	if b.reasoning() == nil {
		return b.renderChat(msgs, tools)
	}
	if len(msgs) == 0 || msgs[0].Role != genq.RoleSystem {
		msgs = append([]genq.Message{{Role: genq.RoleSystem, Content: strings.TrimSpace(b.cfg.SystemPrompt)}}, msgs...)
	}
	return b.tmpl.RenderReasoning(msgs, tools, thinks, effort)
}
