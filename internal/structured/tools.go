package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// The text of a tool call, Llama 3.1's JSON format: the model writes
//
//	{"name": "get_weather", "parameters": {"city": "Oslo"}}
//
// and several calls in one answer are joined by callSeparator, the way
// vLLM's Llama 3 JSON parser reads them.
const (
	callSeparator = "; "
	callOpen      = `{"name": "`
	callArgs      = `", "parameters": `
	callClose     = "}"
)

// FormatToolCall writes a call the way the model writes it, for rendering
// an assistant's earlier calls into the prompt.
func FormatToolCall(name, arguments string) string {
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	return callOpen + name + callArgs + arguments + callClose
}

// FormatToolCalls writes an assistant's calls, joined as the model joins
// them.
func FormatToolCalls(calls []genq.ToolCall) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = FormatToolCall(c.Function.Name, c.Function.Arguments)
	}
	return strings.Join(parts, callSeparator)
}

// CompileToolCalls compiles the grammar of the calls an answer may make:
// one call of one of tools, or, when parallel, one or more joined by
// "; ". Each call's arguments match its tool's parameters schema; a tool
// without one takes any object.
func CompileToolCalls(tools []genq.Tool, parallel bool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, genq.Errorf(genq.Invalid, "no tools to call")
	}
	c := newCompiler()
	b := c.b
	calls := make([]frag, 0, len(tools))
	for i, t := range tools {
		args, err := c.document(t.Function.Parameters, "tools["+strconv.Itoa(i)+"].function.parameters")
		if err != nil {
			return nil, err
		}
		calls = append(calls, b.seq(b.lit(callOpen+t.Function.Name+callArgs), args, b.lit(callClose)))
	}
	one := b.newRule("tool call")
	b.define(one, b.alt(calls...))
	top := b.newRule("tool calls")
	if parallel {
		b.define(top, b.seq(b.call(one), b.star(b.seq(b.lit(callSeparator), b.call(one)))))
	} else {
		b.define(top, b.call(one))
	}
	b.g.top = top
	if err := b.finish(); err != nil {
		return nil, err
	}
	return b.g, nil
}

// document compiles one schema of several in a grammar: its "#" and $defs
// are its own. An empty schema is any object, as a tool without parameters
// takes.
func (c *compiler) document(schema json.RawMessage, where string) (frag, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return c.b.call(c.bi.object), nil
	}
	if len(schema) > MaxSchemaBytes {
		return frag{}, genq.Errorf(genq.Invalid, "%s: the schema is %d bytes; the limit is %d", where, len(schema), MaxSchemaBytes)
	}
	root, err := parseJSON(schema)
	if err != nil {
		return frag{}, prefixed(where, err)
	}
	c.root, c.defRules = root, map[string]int32{}
	c.rootRule = c.b.newRule(where)
	f, err := c.compile(root, "#")
	if err != nil {
		return frag{}, prefixed(where, err)
	}
	c.b.define(c.rootRule, f)
	return c.b.call(c.rootRule), nil
}

func prefixed(where string, err error) error {
	var e *genq.Error
	if errors.As(err, &e) {
		return &genq.Error{Code: e.Code, Message: where + ": " + e.Message, Err: e.Err}
	}
	return err
}

// ParseToolCalls reads the calls an answer made, written as
// CompileToolCalls' grammar has them. It reports false when the text is
// not calls (an answer in prose, when the model was free to give one); the
// arguments keep the model's own text.
func ParseToolCalls(text string) ([]genq.ToolCallFunction, bool) {
	rest := strings.TrimSpace(text)
	var calls []genq.ToolCallFunction
	for rest != "" {
		if len(calls) > 0 {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, strings.TrimSpace(callSeparator)); !ok {
				return nil, false
			}
			rest = strings.TrimLeft(rest, " \t\r\n")
		}
		dec := json.NewDecoder(strings.NewReader(rest))
		var call struct {
			Name       *string         `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := dec.Decode(&call); err != nil || call.Name == nil || len(call.Parameters) == 0 || call.Parameters[0] != '{' {
			return nil, false
		}
		calls = append(calls, genq.ToolCallFunction{Name: *call.Name, Arguments: string(call.Parameters)})
		rest = strings.TrimLeft(rest[dec.InputOffset():], " \t\r\n")
	}
	return calls, len(calls) > 0
}
