package structured

import (
	"errors"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
)

// Two schemas in the shapes of Claude Code's tools' that genq cannot
// enforce exactly: Workflow's script, a string of at most 524,288
// characters, and SendMessage's to, an allOf of two patterns, the second
// with a word boundary (\b), which genq's automata do not follow.
const (
	workflowSchema    = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"script":{"type":"string","maxLength":524288,"description":"the script"}},"required":["script"],"additionalProperties":false}`
	hugeScriptSchema  = `{"type":"object","properties":{"script":{"type":"string","maxLength":4194304}},"required":["script"],"additionalProperties":false}`
	sendMessageSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"to":{"type":"string","allOf":[{"pattern":"^[a-z]+$"},{"pattern":"^.{1,8}\\b"}]},"message":{"type":"string"}},"required":["to","message"],"additionalProperties":false}`
)

func TestRelaxedToolSchemas(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		paths        []string // what relaxing notes, in order
		accepts      []string // arguments the grammar takes
		refuses      []string // arguments it still refuses
		valid        []string // arguments Check passes
		invalid      []string // and refuses
	}{
		{name: "maxLength beyond the limit becomes unbounded", schema: hugeScriptSchema,
			paths:   []string{"#/properties/script: maxLength dropped"},
			accepts: []string{`{"script": "` + strings.Repeat("x", 2000) + `"}`},
			refuses: []string{`{"script": 3}`, `{}`, `{"script": "a", "other": 1}`},
			valid:   []string{`{"script": "echo"}`},
			invalid: []string{`{"script": "` + strings.Repeat("x", 4194305) + `"}`}},
		{name: "allOf of two patterns keeps one", schema: sendMessageSchema,
			paths:   []string{"#/properties/to/allOf/1: pattern dropped"},
			accepts: []string{`{"to": "abc", "message": "hi"}`, `{"to": "abcdefghijk", "message": "hi"}`},
			refuses: []string{`{"to": "ABC", "message": "hi"}`, `{"to": "abc"}`},
			valid:   []string{`{"to": "abc", "message": "hi"}`},
			invalid: []string{`{"to": "abcdefghijk", "message": "hi"}`, `{"to": "ABC", "message": "hi"}`}},
		{name: "not is dropped", schema: `{"type":"object","properties":{"n":{"type":"array","not":{"uniqueItems":true}}},"required":["n"]}`,
			paths:   []string{"#/properties/n: not dropped"},
			accepts: []string{`{"n": [1, 1]}`, `{"n": [1, 2]}`},
			refuses: []string{`{"n": "x"}`},
			valid:   []string{`{"n": [1, 1]}`},
			invalid: []string{`{"n": [1, 2]}`}},
		{name: "nested, twice", schema: `{"type":"object","properties":{"a":{"type":"array","maxItems":5000,"items":{"type":"object","properties":{"b":{"type":"string","minLength":2000}},"if":{"patternProperties":{"^b":{"type":"string"}}},"then":{"required":["c"]}}}}}`,
			accepts: []string{`{"a": [{"b": "` + strings.Repeat("y", 2000) + `"}]}`},
			refuses: []string{`{"a": [{"b": 1}]}`, `{"a": 1}`, `{"a": [{"b": "x"}]}`},
			valid:   []string{`{"a": [{"b": "` + strings.Repeat("y", 2000) + `", "c": 1}]}`},
			invalid: []string{`{"a": [{"b": "x"}]}`, `{"a": [{"b": "` + strings.Repeat("y", 2000) + `"}]}`}},
		{name: "a format genq refuses is dropped and checked", schema: `{"type":"object","propertyNames":{"format":"hostname"},"properties":{"h":{"type":"string"}},"required":["h"]}`,
			paths:   []string{"#/propertyNames: format dropped"},
			accepts: []string{`{"h": "-not a host-", "-x-": 1}`},
			refuses: []string{`{"h": 1}`},
			valid:   []string{`{"h": "a.example", "a.example": 1}`},
			invalid: []string{`{"h": "a", "-x-": 1}`}},
		{name: "a $ref's target", schema: `{"type":"object","$defs":{"s":{"type":"string","maxLength":2000000}},"properties":{"x":{"$ref":"#/$defs/s"}}}`,
			paths:   []string{"#/$defs/s: maxLength dropped"},
			accepts: []string{`{"x": "y"}`},
			refuses: []string{`{"x": 1}`},
			valid:   []string{`{"x": "y"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileToolCalls([]genq.Tool{tool("ok", `{"type":"object","properties":{"q":{"type":"string"}}}`), tool("f", tc.schema)}, false)
			if err != nil {
				t.Fatal(err)
			}
			if g.RelaxedTool("ok") != nil {
				t.Errorf("the exact tool is marked relaxed")
			}
			r := g.RelaxedTool("f")
			if r == nil {
				t.Fatal("the tool is not marked relaxed")
			}
			if tc.paths != nil && strings.Join(r.Paths, "|") != strings.Join(tc.paths, "|") {
				t.Errorf("paths = %q, want %q", r.Paths, tc.paths)
			}
			if string(r.Schema) != tc.schema {
				t.Errorf("the schema kept is %s, not the client's", r.Schema)
			}
			for _, a := range tc.accepts {
				if !matches(g, toolcall.FormatToolCall("f", a)) {
					t.Errorf("refuses %.80s", a)
				}
			}
			for _, a := range tc.refuses {
				if matches(g, toolcall.FormatToolCall("f", a)) {
					t.Errorf("accepts %.80s", a)
				}
			}
			for _, a := range tc.valid {
				if err := r.Check(a); err != nil {
					t.Errorf("Check(%.80s) = %v", a, err)
				}
			}
			for _, a := range tc.invalid {
				err := r.Check(a)
				if err == nil {
					t.Errorf("Check(%.80s) passes", a)
				} else if strings.Contains(err.Error(), "abcdefghijk") || strings.Contains(err.Error(), "ABC") {
					t.Errorf("Check's error tells the arguments: %v", err)
				}
			}
			if !matches(g, toolcall.FormatToolCall("ok", `{"q": "x"}`)) {
				t.Errorf("the exact tool's call is refused")
			}
		})
	}
}

// TestExactToolsUnchanged: a tool set that compiles exactly compiles to the
// same grammar as before relaxing existed, and no tool is marked.
func TestExactToolsUnchanged(t *testing.T) {
	for _, s := range []string{`{"type":"object","properties":{"s":{"type":"string","maxLength":1024}}}`, workflowSchema,
		`{"type":"object","properties":{"s":{"allOf":[{"type":"string"},{"pattern":"^a"}]}}}`} {
		tools := []genq.Tool{tool("f", s)}
		g, err := CompileToolCalls(tools, true)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := compileToolsExact(toolcall.Llama3JSON, tools, true, false, func(i int) int { return i })
		if err != nil {
			t.Fatal(err)
		}
		if g.Relaxed() != nil || len(g.Nodes) != len(exact.Nodes) || len(g.Rules) != len(exact.Rules) {
			t.Errorf("%s: relaxed %v, %d nodes and %d rules, want %d and %d", s, g.Relaxed(), len(g.Nodes), len(g.Rules), len(exact.Nodes), len(exact.Rules))
		}
	}
}

func TestUnrelaxableToolSchemas(t *testing.T) {
	yes := true
	strict := tool("s", hugeScriptSchema)
	strict.Function.Strict = &yes
	for _, tc := range []struct {
		tools []genq.Tool
		want  string
	}{
		{[]genq.Tool{tool("a", `{"type":`)}, "tools[0].function.parameters: the schema is not valid JSON"},
		{[]genq.Tool{tool("a", `{}`), tool("b", `3`)}, "tools[1].function.parameters: the schema at # must be an object or a boolean"},
		{[]genq.Tool{tool("a", `{}`), tool("b", `{"$ref":"#/$defs/missing"}`)}, `tools[1].function.parameters: at #: $ref "#/$defs/missing" points to nothing`},
		{[]genq.Tool{tool("a", `{}`), strict}, "tools[1].function.parameters: at #/properties/script: maxLength is 4194304"},
	} {
		_, err := CompileToolCalls(tc.tools, true)
		if err == nil || genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), tc.want) {
			t.Errorf("%s: err = %v, want invalid with %q", tc.tools[len(tc.tools)-1].Function.Parameters, err, tc.want)
		}
	}
}

// TestForJobNamesTheJobsTool: with tool_choice naming one tool, a refusal
// names that tool's index among the job's, and the relaxed tools come
// with the grammar.
func TestForJobNamesTheJobsTool(t *testing.T) {
	chat := []genq.Message{{Role: "user", Content: "hi"}}
	tools := []genq.Tool{tool("a", `{}`), tool("Workflow", hugeScriptSchema), tool("bad", `{"type":"object","properties":{"x":{"$ref":"#/nowhere"}}}`)}
	job := genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: tools, ToolChoice: &genq.ToolChoice{Function: "bad"}}}
	_, err := NewCache(4).ForJob(job)
	var tse *ToolSchemaError
	if err == nil || !strings.HasPrefix(genq.ErrorMessage(err), "tools[2].function.parameters: ") || !errors.As(err, &tse) || tse.Index != 2 || tse.Tool != "bad" {
		t.Errorf("err = %v (%+v), want tools[2] named", err, tse)
	}
	job.ToolChoice = &genq.ToolChoice{Mode: "auto"}
	job.Tools = tools[:2]
	c, err := NewCache(4).ForJob(job)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Grammar.RelaxedTool("Workflow"); r == nil || len(c.Grammar.Relaxed()) != 1 {
		t.Errorf("relaxed = %v", c.Grammar.Relaxed())
	}
}
