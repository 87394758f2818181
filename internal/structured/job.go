package structured

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
)

// Constraint is what decoding holds a job's answer to.
type Constraint struct {
	// Grammar is the language of the answer; nil leaves it free.
	Grammar *grammar.Grammar
	// Lazy binds the grammar only once the answer opens a call (its
	// format's Opener, after whitespace and, in a dialect with reasoning,
	// a reasoning block): with tool_choice "auto" the model may answer in
	// prose instead, and once it starts a call, the call is held to the
	// tools' schemas.
	Lazy bool
	// ToolCalls says the answer, when it matches the grammar, is tool
	// calls to parse (toolcall.Dialect.Parse) rather than content.
	ToolCalls bool
	// Dialect is the model's way of writing calls, for a tool constraint.
	Dialect toolcall.Dialect
}

// LazyTrigger is the byte that opens a Llama3JSON call, on which a lazy
// grammar of that format binds; toolcall.ToolFormat.Opener names every
// format's.
const LazyTrigger = '{'

// ForJob works out a job's constraint from its response_format and tools,
// compiling each grammar once per distinct request (by the hash of what
// shapes it). Errors are genq.Invalid and say what is wrong: a schema
// keyword genq cannot enforce, a $ref to nowhere, a schema nothing
// satisfies. Calls are held to Llama3JSON; ForJobIn takes the model's
// dialect.
func (c *Cache) ForJob(j genq.Job) (Constraint, error) { return c.ForJobIn(j, toolcall.Dialect{}) }

// ForJobIn is ForJob for a model whose calls are written in dialect d
// (chattemplate.Template.Dialect).
func (c *Cache) ForJobIn(j genq.Job, d toolcall.Dialect) (Constraint, error) {
	if mode := j.ToolMode(); mode != "" {
		parallel := j.Parallel() && (j.ToolChoice == nil || j.ToolChoice.Function == "")
		tools := j.OfferedTools()
		key, err := toolsKey(tools, parallel, d.Format, c.ClosedObjects)
		if err != nil {
			return Constraint{}, err
		}
		indexOf := func(i int) int { // the offered tool's index among the job's
			for k, t := range j.Tools {
				if t.Function.Name == tools[i].Function.Name {
					return k
				}
			}
			return i
		}
		g, err := c.compileKeyed(key, func() (*grammar.Grammar, error) {
			return compileTools(d.Format, tools, parallel, c.ClosedObjects, indexOf)
		})
		if err != nil {
			return Constraint{}, err
		}
		return Constraint{Grammar: g, Lazy: mode == genq.ToolChoiceAuto, ToolCalls: true, Dialect: d}, nil
	}
	f := j.ResponseFormat
	if f == nil {
		return Constraint{}, nil
	}
	switch f.Type {
	case genq.FormatJSONObject:
		g, err := c.compileKeyed(sha256.Sum256([]byte("json_object")), func() (*grammar.Grammar, error) { return CompileJSONObject(), nil })
		return Constraint{Grammar: g}, err
	case genq.FormatJSONSchema:
		if f.JSONSchema == nil || len(bytes.TrimSpace(f.JSONSchema.Schema)) == 0 {
			return Constraint{}, genq.Errorf(genq.Invalid, "response_format.json_schema.schema is required")
		}
		strict := f.JSONSchema.Strict != nil && *f.JSONSchema.Strict
		g, err := c.CompileWith(f.JSONSchema.Schema, Options{Strict: strict})
		if err != nil {
			return Constraint{}, prefixed("response_format.json_schema.schema", err)
		}
		return Constraint{Grammar: g}, nil
	}
	return Constraint{}, nil
}

// toolsKey hashes what shapes a tool grammar: the tools' names and
// parameters, whether calls may repeat, and the format they are written in.
// Descriptions do not change it.
func toolsKey(tools []genq.Tool, parallel bool, f toolcall.ToolFormat, closed bool) ([sha256.Size]byte, error) {
	type shape struct {
		Name       string          `json:"n"`
		Parameters json.RawMessage `json:"p,omitempty"`
		Closed     bool            `json:"c,omitempty"`
		Strict     bool            `json:"s,omitempty"`
	}
	shapes := make([]shape, len(tools))
	for i, t := range tools {
		shapes[i] = shape{t.Function.Name, t.Function.Parameters, closed || strictTool(t), strictTool(t)}
	}
	b, err := json.Marshal(struct {
		Tools    []shape             `json:"t"`
		Parallel bool                `json:"par"`
		Format   toolcall.ToolFormat `json:"f,omitempty"`
	}{shapes, parallel, f})
	if err != nil {
		return [sha256.Size]byte{}, genq.WrapError(genq.Invalid, err, "tools: a parameters schema is not JSON")
	}
	return sha256.Sum256(append([]byte("tools\x00"), b...)), nil
}

// NewOpening starts following the answer for constraint c. It is nil when
// there is nothing to follow: the grammar binds at the first byte (calls
// required of a dialect without reasoning), or c is no tool constraint.
func (c Constraint) NewOpening() *grammar.Opening {
	if !c.ToolCalls || c.Grammar == nil || (!c.Lazy && !c.Dialect.Reasoning) {
		return nil
	}
	return grammar.NewOpening(c.Lazy, c.Dialect.Reasoning, c.Dialect.Format.Opener())
}
