package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
)

// CompileToolCalls compiles the grammar of the calls an answer may make in
// Llama3JSON: one call of one of tools, or, when parallel, one or more
// joined by "; " (CompileTools).
func CompileToolCalls(tools []genq.Tool, parallel bool) (*grammar.Grammar, error) {
	return CompileTools(toolcall.Llama3JSON, tools, parallel)
}

// document compiles one schema of several in a grammar: its "#" and $defs
// are its own, its rule is named name. No schema (absent or null) is an
// empty parameter list, as OpenAI defines a function without parameters:
// the arguments are {}. Errors do not name the schema: the caller does.
func (c *compiler) document(schema json.RawMessage, name string) (grammar.Frag, error) {
	if noSchema(schema) {
		schema = json.RawMessage(noParameters)
	}
	if len(schema) > MaxSchemaBytes {
		return grammar.Frag{}, genq.Errorf(genq.Invalid, "the schema is %d bytes; the limit is %d", len(schema), MaxSchemaBytes)
	}
	root, err := parseJSON(schema)
	if err != nil {
		return grammar.Frag{}, err
	}
	if err := c.readDraft(root, false); err != nil {
		return grammar.Frag{}, err
	}
	c.root, c.defRules = root, map[memoKey]int32{}
	c.rootRule = c.b.NewRule(name)
	f, err := c.compile(root, "#")
	if err != nil {
		return grammar.Frag{}, err
	}
	c.b.Define(c.rootRule, f)
	return c.b.Call(c.rootRule), nil
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

// CompileTools compiles the grammar of the calls an answer may make in
// format f: one call of one of tools, or, when parallel, one or more. Each
// call's arguments match its tool's parameters schema; a tool without one
// takes any object.
//
// A tool's schema genq cannot enforce exactly is relaxed (relax.go): the
// grammar holds its calls to what can be enforced, and Grammar.Relaxed
// names the tool, so that its calls' arguments are checked once finished.
// A strict tool's schema, or one that cannot be relaxed (not JSON, not a
// schema), is refused.
func CompileTools(f toolcall.ToolFormat, tools []genq.Tool, parallel bool) (*grammar.Grammar, error) {
	return compileTools(f, tools, parallel, false, nil)
}

// strictTool tells a tool whose strict: true makes its parameters' schema
// strict (Options.Strict).
func strictTool(t genq.Tool) bool { return t.Function.Strict != nil && *t.Function.Strict }

// compileTools is CompileTools; closed closes every tool's objects, strict or not.
// indexOf maps a tool's index in tools to the one errors name (its index
// in the job's tools, of which tools may be the one tool_choice names);
// nil keeps it.
func compileTools(f toolcall.ToolFormat, tools []genq.Tool, parallel, closed bool, indexOf func(int) int) (*grammar.Grammar, error) {
	if len(tools) == 0 {
		return nil, genq.Errorf(genq.Invalid, "no tools to call")
	}
	if indexOf == nil {
		indexOf = func(i int) int { return i }
	}
	g, err := compileToolsExact(f, tools, parallel, closed, indexOf)
	if err == nil || genq.ErrorCode(err) != genq.Invalid {
		return g, err
	}
	relaxedTools, relaxed, rerr := relaxTools(tools, closed, indexOf)
	if rerr != nil {
		return nil, rerr
	}
	if len(relaxed) == 0 { // no one schema fails alone: the set does
		return nil, err
	}
	g, err = compileToolsExact(f, relaxedTools, parallel, closed, indexOf)
	if err != nil {
		return nil, err
	}
	g.RelaxedTools = relaxed
	return g, nil
}

// compileToolsExact is compileTools, each tool's schema held to exactly.
func compileToolsExact(f toolcall.ToolFormat, tools []genq.Tool, parallel, closed bool, indexOf func(int) int) (*grammar.Grammar, error) {
	l := f.Layout()
	if f == toolcall.Harmony {
		// <|call|> ends the answer: a harmony answer makes one call.
		parallel = false
	}
	c := newCompiler()
	b := c.b
	idRule := int32(-1)
	if l.ID {
		idRule = b.NewRule("call id")
		b.Define(idRule, b.Seq(b.Lit(toolcall.MistralIDHead), b.Repeat(toolcall.MistralIDLen, toolcall.MistralIDLen, func() grammar.Frag {
			return b.Ranges('0', '9', 'A', 'Z', 'a', 'z')
		}), b.Lit(`"`)))
	}
	calls := make([]grammar.Frag, 0, len(tools))
	for i, t := range tools {
		c.strict = strictTool(t)
		c.closed = closed || c.strict
		args, err := c.document(t.Function.Parameters, "tools["+strconv.Itoa(i)+"].function.parameters")
		if err != nil {
			return nil, toolSchemaError(indexOf(i), t.Function.Name, err)
		}
		parts := []grammar.Frag{b.Lit(l.Head + t.Function.Name + l.Args), args}
		if l.ID {
			parts = append(parts, b.Opt(b.Call(idRule)))
		}
		parts = append(parts, b.Lit(l.Tail))
		calls = append(calls, b.Seq(parts...))
	}
	one := b.NewRule("tool call")
	b.Define(one, b.Alt(calls...))
	top := b.NewRule("tool calls")
	body := b.Call(one)
	if parallel {
		body = b.Seq(b.Call(one), b.Star(b.Seq(b.Lit(l.Sep), b.Call(one))))
	}
	b.Define(top, b.Seq(b.Lit(l.Open), body, b.Lit(l.Close)))
	b.Grammar.Top = top
	if err := b.Finish(); err != nil {
		return nil, err
	}
	return b.Grammar, nil
}
