package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// responseTool is a tool in the Responses API's flat shape: a function, a
// namespace of functions, or a tool genq cannot run (hosted: web_search,
// file_search, code_interpreter, mcp, …; or a custom tool of free text).
type responseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Tools       []responseTool  `json:"tools"` // a namespace's
}

// responseTools are a request's tools as a job's: its function tools, a
// namespace's functions among them. The others are left out of the
// prompt, and ignored names them: hosted tools by their type, custom
// tools by their name.
func responseTools(in []responseTool) (tools []genq.Tool, ignored []string) {
	for _, t := range in {
		switch t.Type {
		case "function":
			tools = append(tools, genq.Tool{Type: "function", Function: genq.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
		case "namespace":
			inner, innerIgnored := responseTools(t.Tools)
			tools, ignored = append(tools, inner...), append(ignored, innerIgnored...)
		default:
			ignored = append(ignored, ignoredName(t.Type, t.Name))
		}
	}
	return tools, ignored
}

// ignoredName names a tool genq leaves out: a custom tool by its name,
// any other by its type.
func ignoredName(typ, name string) string {
	if typ == "custom" && name != "" {
		return name
	}
	return typ
}

// responseToolChoice is the Responses API's tool_choice: a mode,
// {"type":"function","name":…}, or a choice that forces a tool genq
// cannot run (Forced names it: a hosted tool's type, a custom tool's
// name), which the request is refused for.
type responseToolChoice struct {
	genq.ToolChoice
	Forced string
}

func (c *responseToolChoice) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		return c.ToolChoice.UnmarshalJSON(b)
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	switch err := json.Unmarshal(b, &named); {
	case err != nil || named.Type == "":
		return genq.Errorf(genq.Invalid, `tool_choice must be "none", "auto", "required" or {"type":"function","name":…}`)
	case named.Type == "function" && named.Name != "":
		c.ToolChoice = genq.ToolChoice{Function: named.Name}
	case named.Type == "function":
		return genq.Errorf(genq.Invalid, `tool_choice {"type":"function"} needs the function's name`)
	default:
		c.Forced = ignoredName(named.Type, named.Name)
	}
	return nil
}

// forcesIgnored refuses a tool_choice that forces a tool genq left out.
func forcesIgnored(c *genq.ToolChoice, forced string, ignored []string) error {
	switch {
	case forced != "":
		return genq.Errorf(genq.Invalid, "tool_choice forces %q, a tool this server cannot run (only function tools are served): let the model choose, or give it as a function", forced)
	case c != nil && slices.Contains(ignored, c.Function):
		return genq.Errorf(genq.Invalid, "tool_choice forces %q, a tool this server cannot run (only function tools are served): let the model choose, or give it as a function", c.Function)
	}
	return nil
}

// choiceOf is the job's choice, once every tool it would choose from is
// known: a choice among the tools genq cannot run alone (none left) is
// dropped, as then the model has nothing to call; one that forces them
// is refused.
func choiceOf(c *genq.ToolChoice, tools []genq.Tool, ignored []string) (*genq.ToolChoice, error) {
	switch {
	case c == nil || len(tools) > 0 || len(ignored) == 0:
		return c, nil
	case c.Mode == genq.ToolChoiceRequired:
		return nil, genq.Errorf(genq.Invalid, "tool_choice \"required\" forces a tool, and this server can run none of these (%s): only function tools are served", strings.Join(ignored, ", "))
	case c.Function == "":
		return nil, nil
	}
	return c, nil
}

// responseFunctionCall is an output item: a call the model made.
type responseFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// functionCall is call index of job jobID as an output item.
func functionCall(jobID string, index int, name, arguments, status string) responseFunctionCall {
	return responseFunctionCall{Type: "function_call", ID: "fc_" + jobID + "_" + strconv.Itoa(index),
		CallID: genq.ToolCallID(jobID, index), Name: name, Arguments: arguments, Status: status}
}
