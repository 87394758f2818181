// Package chattemplate renders a conversation with a model's own chat
// template: the Jinja source a GGUF carries under tokenizer.chat_template,
// run by a Go Jinja engine (github.com/ardanlabs/jinja) the way llama.cpp's
// server runs it with --jinja. The variables are llama.cpp's: messages (in
// OpenAI's shape; a call's arguments as an object where the template reads
// them so), tools, add_generation_prompt, bos_token, eos_token,
// enable_thinking, date_string and datetime, and the functions
// raise_exception and strftime_now. A template that cannot render tools, or
// whose calls genq cannot parse, gets the tools the Llama 3.1 way
// (llama31.go), in the format genq then holds the answer to.
package chattemplate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// SpecialTokens are what the model's vocabulary tells a template: the texts
// of its BOS and EOS tokens (bos_token, eos_token), and whether its
// tokenizer adds them itself, in which case a BOS the template writes first
// (an EOS it writes last) is cut from the text, as llama.cpp cuts it, so
// that the prompt holds one.
type SpecialTokens struct {
	BOS, EOS       string
	AddBOS, AddEOS bool
}

// Template is a model's compiled chat template and what genq found out
// about it when it was compiled. It is safe for concurrent use.
type Template struct {
	src     string
	tmpl    *jinja.Template
	special SpecialTokens
	caps    caps
	dialect toolcall.Dialect
	// known is set when the template writes earlier calls in one of
	// genq's formats (dialect.Format): only then does it render tools.
	known bool
	// ipython is the role the Llama 3.1 way gives a tool's result: Meta's
	// "ipython", or "user" for a template that renders no such role.
	ipython string
	// trim: llama.cpp trims every message's content for this template
	// (StepFun's), and so does genq.
	trim     bool
	thinking bool
	// readsReasoning: the template reads an assistant turn's
	// reasoning_content (Qwen3's, DeepSeek's), which it is then given.
	readsReasoning bool
	now            func() time.Time
}

// Option sets how a Template renders.
type Option func(*Template)

// WithClock sets the clock that date_string, datetime and strftime_now read
// (by default time.Now, in local time as llama.cpp's).
func WithClock(now func() time.Time) Option { return func(t *Template) { t.now = now } }

// WithThinking sets enable_thinking, which templates of reasoning models
// read to let the model think or not. It is on by default, as llama-server
// turns it on for a template whose reasoning block its analysis finds: of
// the templates that read it, only Apertus's is one llama-server renders
// with it off.
func WithThinking(on bool) Option { return func(t *Template) { t.thinking = on } }

// New compiles a model's chat template, works out what it can render
// (caps.go) and in which format it writes tool calls, and renders a
// one-message chat to check it runs. A template the engine cannot parse or
// run fails here, when the model loads, with the engine's reason.
func New(source string, special SpecialTokens, opts ...Option) (*Template, error) {
	if strings.TrimSpace(source) == "" {
		return nil, errors.New("the model has no chat template (GGUF key tokenizer.chat_template)")
	}
	t := &Template{src: source, special: special, now: time.Now, thinking: true}
	for _, o := range opts {
		o(t)
	}
	tmpl, err := jinja.Compile(rewrite(source))
	if err != nil {
		return nil, fmt.Errorf("the model's chat template cannot be compiled: %w", err)
	}
	t.tmpl = tmpl
	t.trim = strings.Contains(source, "You have access to the following functions in JSONSchema format")
	// gpt-oss's template reads an earlier answer's reasoning as thinking.
	t.readsReasoning = strings.Contains(source, "reasoning_content") || isHarmony(source) && strings.Contains(source, ".thinking")
	t.caps = probeCaps(t)
	t.dialect, t.known = probeDialect(t)
	t.ipython = probeIPython(t)
	if _, err := t.Render([]genq.Message{{Role: genq.RoleUser, Content: "test"}}, nil); err != nil {
		return nil, fmt.Errorf("the model's chat template cannot render a one-message chat: %w", err)
	}
	return t, nil
}

// RendersTools reports whether the template renders the tools, a
// conversation's earlier calls and their results itself, in a format genq
// parses. Otherwise Render writes them into the conversation the Llama 3.1
// way, and the answer's calls are Llama3JSON.
func (t *Template) RendersTools() bool {
	return t.known && t.caps.tools && t.caps.toolCalls
}

// ToolFormat is the format the model writes its calls in: the template's
// own, when it renders tools, else Llama3JSON, which Render then teaches
// the model.
func (t *Template) ToolFormat() toolcall.ToolFormat { return t.Dialect().Format }

// Dialect is how the model answers with calls: ToolFormat, and whether an
// answer may open with a <think> block (the template knows the tag).
func (t *Template) Dialect() toolcall.Dialect {
	if !t.RendersTools() && !t.dialect.Channels() {
		return toolcall.Dialect{Format: toolcall.Llama3JSON, Reasoning: t.dialect.Reasoning}
	}
	return t.dialect
}

// Render renders msgs, the tools the answer may call, and the generation
// prompt (the assistant's header): the text to tokenize, with the BOS
// and EOS the tokenizer adds cut (SpecialTokens). Messages are rendered as
// they are: a worker's default system prompt is the caller's to put first.
// A conversation the template refuses (raise_exception: roles out of
// order, a call id a Mistral template cannot take) or cannot render is
// genq.Invalid, with the template's reason.
func (t *Template) Render(msgs []genq.Message, tools []genq.Tool) (string, error) {
	return t.RenderThinking(msgs, tools, t.thinking)
}

// RenderThinking is Render with enable_thinking set to thinking for this
// conversation alone: a job that asks its reasoning model not to think
// (Qwen3's template then writes an empty reasoning block).
func (t *Template) RenderThinking(msgs []genq.Message, tools []genq.Tool, thinking bool) (string, error) {
	return t.RenderReasoning(msgs, tools, thinking, "")
}

// RenderReasoning is RenderThinking with reasoning_effort set to effort
// ("low", "medium" or "high"), which gpt-oss's template writes into its
// system message; empty leaves it unset, to the template's default.
func (t *Template) RenderReasoning(msgs []genq.Message, tools []genq.Tool, thinking bool, effort string) (string, error) {
	if !t.RendersTools() && needsTools(msgs, tools) {
		var err error
		if msgs, err = llama31Messages(msgs, tools, t.ipython); err != nil {
			return "", err
		}
		tools = nil
	}
	return t.renderWith(msgs, tools, renderOptions{thinking: thinking, effort: effort})
}

// renderOptions are the variables a render sets for this conversation
// alone: enable_thinking, and reasoning_effort when not empty.
type renderOptions struct {
	thinking bool
	effort   string
}

// ReadsThinking reports whether the template reads enable_thinking (its
// source names it), and so answers RenderThinking's thinking itself.
func (t *Template) ReadsThinking() bool { return strings.Contains(t.src, "enable_thinking") }

// ReadsReasoning reports whether the template reads an assistant turn's
// reasoning_content (its source names it): only then does a message's
// ReasoningContent reach it; other templates never see it.
func (t *Template) ReadsReasoning() bool { return t.readsReasoning }

// needsTools reports whether a conversation has tools or calls to render.
func needsTools(msgs []genq.Message, tools []genq.Tool) bool {
	if len(tools) > 0 {
		return true
	}
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 || m.Role == genq.RoleTool {
			return true
		}
	}
	return false
}

// render renders msgs and tools with the template itself, as llama.cpp
// gives them to it.
func (t *Template) render(msgs []genq.Message, tools []genq.Tool) (string, error) {
	return t.renderWith(msgs, tools, renderOptions{thinking: t.thinking})
}

// renderWith is render with opts' variables.
func (t *Template) renderWith(msgs []genq.Message, tools []genq.Tool, opts renderOptions) (string, error) {
	if laterSystem(msgs) {
		if t.caps.midSystem {
			out, err := t.renderAsIs(msgs, tools, opts)
			if err == nil {
				return out, nil
			}
		}
		msgs = foldSystem(msgs)
	}
	return t.renderAsIs(msgs, tools, opts)
}

// laterSystem reports whether a system message follows the first message.
func laterSystem(msgs []genq.Message) bool {
	for i, m := range msgs {
		if i > 0 && m.Role == genq.RoleSystem {
			return true
		}
	}
	return false
}

// foldSystem moves the text of every system message past the first
// message into the leading system message (made when there is none),
// each after a blank line, for a template that renders no system message
// but the first: the instruction stays a system one, only earlier.
func foldSystem(msgs []genq.Message) []genq.Message {
	out := make([]genq.Message, 0, len(msgs)+1)
	if msgs[0].Role != genq.RoleSystem {
		out = append(out, genq.Message{Role: genq.RoleSystem})
	}
	for i, m := range msgs {
		if i == 0 || m.Role != genq.RoleSystem {
			out = append(out, m)
			continue
		}
		if out[0].Content != "" && m.Content != "" {
			out[0].Content += "\n\n"
		}
		out[0].Content += m.Content
	}
	return out
}

// renderAsIs renders msgs and tools, a leading system message merged
// into the next for a template without the role.
func (t *Template) renderAsIs(msgs []genq.Message, tools []genq.Tool, opts renderOptions) (string, error) {
	if !t.caps.systemRole {
		msgs = mergeSystem(msgs)
	}
	mv, err := t.messageValues(msgs)
	if err != nil {
		return "", err
	}
	vars := map[string]jinja.Value{"messages": jinja.NewList(mv), "enable_thinking": jinja.NewBool(opts.thinking)}
	if opts.effort != "" {
		vars["reasoning_effort"] = jinja.NewString(opts.effort)
	}
	if len(tools) > 0 {
		tv, err := toolValues(tools)
		if err != nil {
			return "", err
		}
		vars["tools"] = jinja.NewList(tv)
	}
	now := t.now()
	vars["datetime"] = jinja.NewString(strftime("%b %d %Y", now))
	vars["date_string"] = jinja.NewString(strftime("%d %b %Y", now))
	vars["add_generation_prompt"] = jinja.NewBool(true)
	// llama-server passes preserve_reasoning (on by default) and the
	// variables templates read it by (caps_apply_preserve_reasoning):
	// earlier turns keep their reasoning blocks.
	vars["preserve_reasoning"] = jinja.NewBool(true)
	vars["preserve_thinking"] = jinja.NewBool(true)
	for _, k := range []string{"clear_thinking", "truncate_history_thinking", "drop_thinking"} {
		vars[k] = jinja.NewBool(false)
	}
	out, err := t.execute(vars, now)
	if err != nil {
		return "", err
	}
	if t.special.AddBOS && t.special.BOS != "" {
		out = strings.TrimPrefix(out, t.special.BOS)
	}
	if t.special.AddEOS && t.special.EOS != "" {
		out = strings.TrimSuffix(out, t.special.EOS)
	}
	return out, nil
}

// execute runs the template with vars and the functions genq gives every
// template, and turns its failures into genq.Invalid errors that say why.
func (t *Template) execute(vars map[string]jinja.Value, now time.Time) (string, error) {
	var raised string
	if _, ok := vars["bos_token"]; !ok {
		vars["bos_token"] = jinja.NewString(t.special.BOS)
		vars["eos_token"] = jinja.NewString(t.special.EOS)
	}
	vars["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		raised = "raise_exception"
		if len(args) > 0 && args[0].IsString() {
			raised = args[0].AsString()
		}
		return jinja.Undefined(), errors.New(raised)
	})
	vars["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(strftime(args[0].AsString(), now)), nil
	})
	vars[tojsonIndentFunc] = jinja.NewCallable(tojsonIndentFunc, tojsonIndent)
	out, err := t.tmpl.RenderValues(vars)
	switch {
	case raised != "":
		return "", genq.WrapError(genq.Invalid, err, "the model's chat template refuses the conversation: "+raised)
	case err != nil:
		return "", genq.WrapError(genq.Invalid, err, "the model's chat template cannot render the conversation: "+err.Error())
	}
	return out, nil
}

// mergeSystem puts a leading system message into the message after it, for
// a template that has no system role, as llama.cpp does; a system message
// alone is dropped.
func mergeSystem(msgs []genq.Message) []genq.Message {
	if len(msgs) == 0 || msgs[0].Role != genq.RoleSystem {
		return msgs
	}
	if len(msgs) == 1 {
		return nil
	}
	out := append([]genq.Message(nil), msgs[1:]...)
	out[0].Content = msgs[0].Content + "\n" + out[0].Content
	return out
}
