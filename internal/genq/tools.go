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

// validateStructured checks the fields of structured output and tools
// that need no schema compiler: the compiler's own checks (the schemas'
// keywords) run where the grammar is built.
func (j Job) validateStructured() error {
	if f := j.ResponseFormat; f != nil {
		switch f.Type {
		case FormatText, FormatJSONObject:
			if f.JSONSchema != nil {
				return Errorf(Invalid, "response_format.json_schema is only for type %q", FormatJSONSchema)
			}
		case FormatJSONSchema:
			if f.JSONSchema == nil || len(bytes.TrimSpace(f.JSONSchema.Schema)) == 0 {
				return Errorf(Invalid, "response_format.json_schema.schema is required with type %q", FormatJSONSchema)
			}
			if f.JSONSchema.Name != "" && !toolName.MatchString(f.JSONSchema.Name) {
				return Errorf(Invalid, "response_format.json_schema.name %q must be 1 to 64 letters, digits, underscores or dashes", f.JSONSchema.Name)
			}
		default:
			return Errorf(Invalid, `response_format.type %q is not one of "text", "json_object" and "json_schema"`, f.Type)
		}
	}
	if len(j.Tools) > MaxTools {
		return Errorf(Invalid, "tools holds %d tools; the limit is %d", len(j.Tools), MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range j.Tools {
		if t.Type != "function" {
			return Errorf(Invalid, `tools[%d].type %q is not "function"`, i, t.Type)
		}
		if t.Function.Name == "" {
			return Errorf(Invalid, "tools[%d].function.name is required", i)
		}
		if !toolName.MatchString(t.Function.Name) {
			return Errorf(Invalid, "tools[%d].function.name %q must be 1 to 64 letters, digits, underscores or dashes", i, t.Function.Name)
		}
		if seen[t.Function.Name] {
			return Errorf(Invalid, "tools[%d].function.name %q names two tools", i, t.Function.Name)
		}
		seen[t.Function.Name] = true
	}
	if c := j.ToolChoice; c != nil {
		if len(j.Tools) == 0 && c.Mode != ToolChoiceNone {
			return Errorf(Invalid, "tool_choice needs tools")
		}
		if c.Function != "" && !seen[c.Function] {
			return Errorf(Invalid, "tool_choice names function %q, which tools does not hold", c.Function)
		}
	}
	if j.ParallelToolCalls != nil && len(j.Tools) == 0 {
		return Errorf(Invalid, "parallel_tool_calls needs tools")
	}
	if len(j.Tools) > 0 && j.ResponseFormat != nil && j.ResponseFormat.Type != FormatText && j.toolChoice() != ToolChoiceNone {
		return Errorf(Invalid, "response_format and tools cannot both constrain one answer; set tool_choice to \"none\" or drop one")
	}
	if (len(j.Tools) > 0 || j.ResponseFormat != nil) && !j.Detailed() {
		return Errorf(Invalid, "response_format and tools need messages or a prompt")
	}
	return nil
}

// toolChoice is the mode the job's tools are offered in: "auto" when it
// sets none, as OpenAI does, and "required" for a named function.
func (j Job) toolChoice() string {
	switch {
	case j.ToolChoice == nil:
		return ToolChoiceAuto
	case j.ToolChoice.Function != "":
		return ToolChoiceRequired
	}
	return j.ToolChoice.Mode
}

// ToolMode is how the job's tools are offered: "" when it has none (or
// tool_choice is "none"), else "auto" or "required" (a named function
// included).
func (j Job) ToolMode() string {
	if len(j.Tools) == 0 {
		return ""
	}
	if m := j.toolChoice(); m != ToolChoiceNone {
		return m
	}
	return ""
}

// OfferedTools is the tools the answer may call: all of them, or the one
// tool_choice names.
func (j Job) OfferedTools() []Tool {
	if j.ToolMode() == "" {
		return nil
	}
	if j.ToolChoice != nil && j.ToolChoice.Function != "" {
		for _, t := range j.Tools {
			if t.Function.Name == j.ToolChoice.Function {
				return []Tool{t}
			}
		}
	}
	return j.Tools
}

// PromptTools is the tools a prompt shows the model: those it may call,
// and with tool_choice "none" all of them still, as vLLM shows them, so
// that a conversation that called them reads as it did.
func (j Job) PromptTools() []Tool {
	if offered := j.OfferedTools(); len(offered) > 0 {
		return offered
	}
	return j.Tools
}

// Parallel reports whether the answer may make more than one call:
// parallel_tool_calls, true unless the job says otherwise, as OpenAI's.
func (j Job) Parallel() bool { return j.ParallelToolCalls == nil || *j.ParallelToolCalls }

// ToolCallID names call i of a job's answer. It is worked out from the
// job's id, so a job run again answers with the same ids, and a stream's
// deltas carry the ids of the whole answer.
func ToolCallID(jobID string, i int) string {
	return "call_" + strings.ReplaceAll(jobID, "-", "") + "_" + strconv.Itoa(i)
}
