package chattemplate

import (
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// caps is what a template can render, found as llama.cpp finds it
// (common/jinja/caps.cpp) by rendering small conversations. llama.cpp's
// engine records which input values a render used; this engine cannot, so
// a value counts as used when changing it changes what the template
// renders (or makes it fail).
type caps struct {
	stringContent bool // a message's content may be a string
	typedContent  bool // ... or a list of typed parts
	systemRole    bool
	midSystem     bool // a system message past the first renders where it is
	tools         bool // the tools' definitions are rendered
	toolCalls     bool // an assistant's calls are rendered
	objectArgs    bool // a call's arguments are read as an object
}

// onlyTyped reports whether content must be given as typed parts.
func (c caps) onlyTyped() bool { return !c.stringContent && c.typedContent }

// probe renders a conversation given as JSON, with tools (JSON, "[]" for
// none), as llama.cpp's probes do: no BOS or EOS text, the generation
// prompt asked for. It reports the text and whether the render succeeded.
func (t *Template) probe(messages, tools string) (string, bool) {
	mv, err := jsonValue([]byte(messages))
	if err != nil {
		panic("chattemplate: a probe's messages are not JSON: " + err.Error())
	}
	tv, err := jsonValue([]byte(tools))
	if err != nil {
		panic("chattemplate: a probe's tools are not JSON: " + err.Error())
	}
	vars := map[string]jinja.Value{"messages": mv, "tools": tv, "add_generation_prompt": jinja.NewBool(true),
		"bos_token": jinja.NewString(""), "eos_token": jinja.NewString("")}
	out, err := t.execute(vars, t.now())
	return out, err == nil
}

const (
	probeTools = `[{"name": "tool", "type": "function", "function": {"name": "tool1", "description": "Tool description",
		"parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}}, "required": ["arg"]}}}]`
	// probeCalls is llama.cpp's conversation of one call; ARGS is replaced.
	probeCalls = `[{"role": "user", "content": "User message"},
		{"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function", "function": {"name": "tool1", "arguments": ARGS}}]},
		{"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
		{"role": "assistant", "content": "The tool response was 'tool response'"},
		{"role": "user", "content": "User message"}]`
	probeNoCalls = `[{"role": "user", "content": "User message"},
		{"role": "assistant", "content": ""},
		{"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
		{"role": "assistant", "content": "The tool response was 'tool response'"},
		{"role": "user", "content": "User message"}]`
)

func probeCaps(t *Template) caps {
	c := caps{stringContent: true, systemRole: true, tools: true, toolCalls: true}

	// Content as a string, and as typed parts: a template that reads parts
	// renders their text, not the list's repr.
	const marker = "STRING_MARKER"
	out, ok := t.probe(`[{"role": "user", "content": "`+marker+`"}]`, "[]")
	strOK := ok && strings.Contains(out, marker)
	out, ok = t.probe(`[{"role": "user", "content": [{"type": "text", "text": "`+marker+`"}]}]`, "[]")
	c.typedContent = ok && strings.Contains(out, marker) && !strings.Contains(out, "'type'") && !strings.Contains(out, `"type"`)
	c.stringContent = strOK || !c.typedContent

	const system = "System message"
	out, ok = t.probe(`[{"role": "system", "content": "`+system+`"}, {"role": "user", "content": "User message"}]`, "[]")
	c.systemRole = ok && strings.Contains(out, system)
	c.midSystem = c.systemRole && probeMidSystem(t)

	// Calls with object arguments, then, unless those are read, with a
	// string of JSON. Each probe asks whether the tools, the calls and the
	// argument change the text.
	calls := func(args string) string { return strings.Replace(probeCalls, "ARGS", args, 1) }
	differs := func(base, messages, tools string) bool {
		other, ok := t.probe(messages, tools)
		return !ok || other != base
	}
	if base, ok := t.probe(calls(`{"arg": "value"}`), probeTools); ok {
		if !differs(base, calls(`{"arg": "value"}`), "[]") {
			c.tools = false
		}
		// An argument read (tojson, items, a key), not the object printed
		// whole as Python's repr, which llama.cpp does not count as use.
		if !differs(base, probeNoCalls, probeTools) {
			c.toolCalls = false
		} else if differs(base, calls(`{"arg": "other"}`), probeTools) && !strings.Contains(base, `{'arg': 'value'}`) {
			c.objectArgs = true
		}
	}
	if !c.objectArgs {
		strArgs := calls(`"{\"arg\": \"value\"}"`)
		base, ok := t.probe(strArgs, probeTools)
		if !ok {
			c.tools, c.toolCalls = false, false
		} else {
			if !differs(base, strArgs, "[]") {
				c.tools = false
			}
			if !differs(base, probeNoCalls, probeTools) {
				c.toolCalls = false
			}
		}
	}
	return c
}

// probeMidSystem reports whether the template renders a system message
// past the first where it is, after a user's turn (as Anthropic's
// mid-conversation system messages come) both before the assistant's
// answer and last: many templates refuse one ("System message must be at
// the beginning"), and some drop it unsaid.
func probeMidSystem(t *Template) bool {
	const mid = "Mid-conversation system message"
	for _, msgs := range []string{
		`[{"role": "system", "content": "System message"}, {"role": "user", "content": "User message"},
			{"role": "system", "content": "` + mid + `"}, {"role": "assistant", "content": "Assistant message"}, {"role": "user", "content": "User message"}]`,
		`[{"role": "user", "content": "User message"}, {"role": "assistant", "content": "Assistant message"},
			{"role": "user", "content": "User message"}, {"role": "system", "content": "` + mid + `"}]`,
	} {
		if out, ok := t.probe(msgs, "[]"); !ok || !strings.Contains(out, mid) {
			return false
		}
	}
	return true
}

// probeDialect finds the format the template writes an assistant's earlier
// calls in, by rendering one and looking for each format's writing of it,
// and whether the template knows the <think> tag. The conversation's turns
// alternate, as Mistral's templates insist.
func probeDialect(t *Template) (toolcall.Dialect, bool) {
	if isHarmony(t.src) {
		// Its calls' headers vary (the recipient before the channel or
		// after it), and the model's answers are channels whatever a
		// probe finds: the source tells.
		return toolcall.Dialect{Format: toolcall.Harmony}, true
	}
	d := toolcall.Dialect{Reasoning: strings.Contains(t.src, toolcall.ThinkOpen)}
	call := genq.ToolCall{ID: "a1B2c3D4e", Type: "function", Function: genq.ToolCallFunction{Name: "probe_fn", Arguments: `{"probe_arg": 1}`}}
	msgs := []genq.Message{
		{Role: genq.RoleUser, Content: "Call it."},
		{Role: genq.RoleAssistant, ToolCalls: []genq.ToolCall{call}},
		{Role: genq.RoleTool, ToolCallID: call.ID, Content: "done"},
		{Role: genq.RoleAssistant, Content: "Done."},
		{Role: genq.RoleUser, Content: "Thanks."},
	}
	tools := []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "probe_fn", Description: "A probe",
		Parameters: []byte(`{"type": "object", "properties": {"probe_arg": {"type": "integer"}}}`)}}}
	out, err := t.render(msgs, tools)
	if err != nil {
		return d, false
	}
	for _, f := range []toolcall.ToolFormat{toolcall.Mistral, toolcall.Hermes, toolcall.Llama3JSON} {
		if strings.Contains(out, f.Write([]genq.ToolCall{call})) {
			d.Format = f
			return d, true
		}
	}
	return d, false
}

// isHarmony reports whether a template writes OpenAI's harmony format
// (gpt-oss's): channels, and an assistant's turn opened by
// <|start|>assistant, as llama.cpp tells it (common_chat_templates_apply).
func isHarmony(src string) bool {
	return strings.Contains(src, toolcall.HarmonyChannel) && strings.Contains(src, toolcall.HarmonyAssistant)
}

// probeIPython finds the role Llama 3.1's tool results take in a template
// that does not render tools: "ipython" where it renders that role's
// message, else "user".
func probeIPython(t *Template) string {
	const marker = "IPYTHON_MARKER"
	out, err := t.render([]genq.Message{{Role: genq.RoleUser, Content: "u"}, {Role: "ipython", Content: marker}}, nil)
	if err == nil && strings.Contains(out, marker) {
		return "ipython"
	}
	return genq.RoleUser
}
