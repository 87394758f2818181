package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// messageValues is the conversation as llama.cpp gives it to a template
// (common_chat_msg::to_json_oaicompat and the fixes
// common_chat_templates_apply_jinja makes for the template's
// capabilities): each message's role and content, always a string (an
// empty one for none) or, for a template that reads only typed content, a
// list of one text part; its tool_call_id; its calls, each type, function
// (name and arguments) and id, the arguments an object for a template that
// reads them so.
func (t *Template) messageValues(msgs []genq.Message) ([]jinja.Value, error) {
	format := t.dialect.Format
	out := make([]jinja.Value, 0, len(msgs))
	for i, m := range msgs {
		content := m.Content
		if t.trim {
			content = strings.TrimSpace(content)
		}
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		if t.caps.onlyTyped() {
			part := jinja.NewDict()
			part.AsDict().Set("type", jinja.NewString("text"))
			part.AsDict().Set("text", jinja.NewString(content))
			dict.Set("content", jinja.NewList([]jinja.Value{part}))
		} else {
			dict.Set("content", jinja.NewString(content))
		}
		if m.ToolCallID != "" {
			dict.Set("tool_call_id", jinja.NewString(t.callID(format, m.ToolCallID)))
		}
		if m.ReasoningContent != "" && m.Role == genq.RoleAssistant && t.readsReasoning {
			// An earlier answer's reasoning, for the template to keep or
			// drop as it does (Qwen3's keeps it after the last user turn).
			dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
			dict.Set("thinking", jinja.NewString(m.ReasoningContent)) // gpt-oss's name for it
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, 0, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(c.Function.Name))
				args := jinja.NewString(c.Function.Arguments)
				if t.caps.objectArgs {
					text := strings.TrimSpace(c.Function.Arguments)
					if text == "" {
						text = "{}"
					}
					v, err := jsonValue([]byte(text))
					if err != nil {
						return nil, genq.WrapError(genq.Invalid, err,
							fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments is not JSON: %v", i, j, err))
					}
					args = v
				}
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				call.AsDict().Set("type", jinja.NewString("function"))
				call.AsDict().Set("function", fn)
				if c.ID != "" {
					call.AsDict().Set("id", jinja.NewString(t.callID(format, c.ID)))
				}
				calls = append(calls, call)
			}
			dict.Set("tool_calls", jinja.NewList(calls))
		}
		out = append(out, d)
	}
	return out, nil
}

// callID is the id a template sees for a call: a Mistral template's
// must be nine letters and digits (toolcall.ToolFormat.CallID).
func (t *Template) callID(f toolcall.ToolFormat, id string) string {
	if t.known {
		return f.CallID(id)
	}
	return id
}

// toolValues is the tools as llama.cpp gives them to a template
// (common_chat_tools_to_json_oaicompat): type, and function's name,
// description (empty when none) and parameters (an empty object when
// none), their keys in the client's order.
func toolValues(tools []genq.Tool) ([]jinja.Value, error) {
	out := make([]jinja.Value, 0, len(tools))
	for i, tool := range tools {
		params := bytes.TrimSpace(tool.Function.Parameters)
		if len(params) == 0 || string(params) == "null" {
			params = []byte("{}")
		}
		pv, err := jsonValue(params)
		if err != nil {
			return nil, genq.WrapError(genq.Invalid, err, fmt.Sprintf("tools[%d].function.parameters is not JSON: %v", i, err))
		}
		fn := jinja.NewDict()
		fn.AsDict().Set("name", jinja.NewString(tool.Function.Name))
		fn.AsDict().Set("description", jinja.NewString(tool.Function.Description))
		fn.AsDict().Set("parameters", pv)
		d := jinja.NewDict()
		d.AsDict().Set("type", jinja.NewString("function"))
		d.AsDict().Set("function", fn)
		out = append(out, d)
	}
	return out, nil
}

// jsonValue reads one JSON value as a template value: objects keep their
// keys' order (llama.cpp's JSON is ordered), and integers stay integers.
func jsonValue(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("something follows the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
	case string:
		return jinja.NewString(tok), nil
	case json.Number:
		return jinja.FromGoValue(tok), nil
	case bool:
		return jinja.NewBool(tok), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}
