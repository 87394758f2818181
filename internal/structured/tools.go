package structured

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/genq/genq/internal/genq"
)

// FormatToolCall writes a call in Llama 3.1's JSON format (Llama3JSON),
// the way the model writes it, for rendering an assistant's earlier calls
// into the prompt.
func FormatToolCall(name, arguments string) string {
	return Llama3JSON.Write([]genq.ToolCall{{Function: genq.ToolCallFunction{Name: name, Arguments: arguments}}})
}

// FormatToolCalls writes an assistant's calls in Llama3JSON, joined as the
// model joins them.
func FormatToolCalls(calls []genq.ToolCall) string { return Llama3JSON.Write(calls) }

// CompileToolCalls compiles the grammar of the calls an answer may make in
// Llama3JSON: one call of one of tools, or, when parallel, one or more
// joined by "; " (ToolFormat.Compile).
func CompileToolCalls(tools []genq.Tool, parallel bool) (*Grammar, error) {
	return Llama3JSON.Compile(tools, parallel)
}

// document compiles one schema of several in a grammar: its "#" and $defs
// are its own, its rule is named name. No schema (absent or null) is an
// empty parameter list, as OpenAI defines a function without parameters:
// the arguments are {}. Errors do not name the schema: the caller does.
func (c *compiler) document(schema json.RawMessage, name string) (frag, error) {
	if noSchema(schema) {
		schema = json.RawMessage(noParameters)
	}
	if len(schema) > MaxSchemaBytes {
		return frag{}, genq.Errorf(genq.Invalid, "the schema is %d bytes; the limit is %d", len(schema), MaxSchemaBytes)
	}
	root, err := parseJSON(schema)
	if err != nil {
		return frag{}, err
	}
	if err := c.readDraft(root, false); err != nil {
		return frag{}, err
	}
	c.root, c.defRules = root, map[memoKey]int32{}
	c.rootRule = c.b.newRule(name)
	f, err := c.compile(root, "#")
	if err != nil {
		return frag{}, err
	}
	c.b.define(c.rootRule, f)
	return c.b.call(c.rootRule), nil
}

// noParameters is the schema of an empty parameter list.
const noParameters = `{"type":"object","properties":{},"additionalProperties":false}`

// noSchema reports whether a tool's parameters are left out: absent, or
// null as some clients write it.
func noSchema(schema json.RawMessage) bool {
	s := bytes.TrimSpace(schema)
	return len(s) == 0 || string(s) == "null"
}

func prefixed(where string, err error) error {
	var e *genq.Error
	if errors.As(err, &e) {
		return &genq.Error{Code: e.Code, Message: where + ": " + e.Message, Err: e.Err}
	}
	return err
}

// ParseToolCalls reads the calls an answer made in Llama3JSON
// (ToolFormat.Parse).
func ParseToolCalls(text string) ([]genq.ToolCallFunction, bool) { return Llama3JSON.Parse(text) }
