package genq

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// ResponseFormat is the shape a text answer must take, OpenAI's
// response_format: free text, any JSON object, or JSON that validates
// against a schema. Decoding is constrained to it, so a stopped answer
// always parses.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// Response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// JSONSchema is a named schema. Every schema is held to; Strict also
// closes its objects to properties they do not list
// (structured.Options.ClosedObjects), as OpenAI's strict schemas are.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Tool is a function the model may call, described by a JSON schema of its
// arguments.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction names a callable function and the schema of its arguments.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is one call the model made: the arguments are a JSON object's
// text, as OpenAI's API gives them.
type ToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is a call's function name and arguments.
type ToolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool choices: whether the model may, must or must not call a tool. A
// ToolChoice naming a function means that function must be called.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ToolChoice is OpenAI's tool_choice: a mode, or one function by name. In
// JSON it is the string of the mode, or
// {"type":"function","function":{"name":…}}.
type ToolChoice struct {
	Mode     string
	Function string
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// MarshalJSON writes the mode, or the named function's object.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Function == "" {
		return json.Marshal(c.Mode)
	}
	var n namedToolChoice
	n.Type, n.Function.Name = "function", c.Function
	return json.Marshal(n)
}

// UnmarshalJSON reads the mode's string or a named function's object.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ToolChoice{}
		if err := json.Unmarshal(b, &c.Mode); err != nil {
			return Errorf(Invalid, "tool_choice: %v", err)
		}
		switch c.Mode {
		case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
			return nil
		}
		return Errorf(Invalid, `tool_choice %q is not one of "none", "auto" and "required", nor a function`, c.Mode)
	}
	var n namedToolChoice
	if err := json.Unmarshal(b, &n); err != nil {
		return Errorf(Invalid, `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":…}}`)
	}
	if n.Type != "function" || n.Function.Name == "" {
		return Errorf(Invalid, `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":…}}`)
	}
	*c = ToolChoice{Function: n.Function.Name}
	return nil
}

// Limits on tools, OpenAI's: a name is 1 to 64 letters, digits,
// underscores and dashes, and a request names at most MaxTools.
const MaxTools = 128

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ToolCallID names call i of a job's answer. It is worked out from the
// job's id, so a job run again answers with the same ids, and a stream's
// deltas carry the ids of the whole answer.
func ToolCallID(jobID string, i int) string {
	return "call_" + strings.ReplaceAll(jobID, "-", "") + "_" + strconv.Itoa(i)
}
