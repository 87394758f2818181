package openai

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/genq/genq/internal/genq"
)

// responseTool is a function tool in the Responses API's flat shape.
type responseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responseTools are a request's tools as a job's; only function tools are
// served (no hosted tools: search, files, code).
func responseTools(in []responseTool) ([]genq.Tool, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]genq.Tool, len(in))
	for i, t := range in {
		if t.Type != "function" {
			return nil, genq.Errorf(genq.Invalid, "tools[%d] is of type %q: only function tools are supported", i, t.Type)
		}
		out[i] = genq.Tool{Type: "function", Function: genq.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
	}
	return out, nil
}

// responseToolChoice is the Responses API's tool_choice: a mode, or
// {"type":"function","name":…}.
type responseToolChoice struct{ genq.ToolChoice }

func (c *responseToolChoice) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		return c.ToolChoice.UnmarshalJSON(b)
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &named); err != nil || named.Type != "function" || named.Name == "" {
		return genq.Errorf(genq.Invalid, `tool_choice must be "none", "auto", "required" or {"type":"function","name":…}`)
	}
	c.ToolChoice = genq.ToolChoice{Function: named.Name}
	return nil
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
