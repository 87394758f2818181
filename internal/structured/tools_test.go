package structured

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func tool(name, params string) genq.Tool {
	return genq.Tool{Type: "function", Function: genq.ToolFunction{Name: name, Parameters: json.RawMessage(params)}}
}

var testTools = []genq.Tool{
	tool("get_weather", `{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`),
	tool("tree", `{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["kids"],"additionalProperties":false}},"$ref":"#/$defs/node"}`),
	tool("ping", ``),     // OpenAI: no parameters is an empty parameter list
	tool("pong", `null`), // as some clients write it
}

func matches(g *Grammar, text string) bool {
	m := g.NewMatcher()
	return m.Advance([]byte(text)) && m.Accepting()
}

func TestToolCallGrammar(t *testing.T) {
	single, err := CompileToolCalls(testTools, false)
	if err != nil {
		t.Fatal(err)
	}
	parallel, err := CompileToolCalls(testTools, true)
	if err != nil {
		t.Fatal(err)
	}
	weather := FormatToolCall("get_weather", `{"city": "Oslo", "unit": "c"}`)
	tree := FormatToolCall("tree", `{"kids": [{"kids": []}]}`)
	ping := FormatToolCall("ping", `{}`)
	for _, tc := range []struct {
		text             string
		single, parallel bool
	}{
		{weather, true, true},
		{tree, true, true},
		{ping, true, true},
		{FormatToolCall("pong", `{ }`), true, true},
		{FormatToolCall("ping", `{"any": [1, 2]}`), false, false}, // an argument to a function that takes none
		{FormatToolCall("pong", `{"a": 1}`), false, false},
		{weather + "; " + tree, false, true},
		{FormatToolCall("get_weather", `{"city": "Oslo"}`), false, false},              // unit missing
		{FormatToolCall("get_weather", `{"city": "Oslo", "unit": "k"}`), false, false}, // not in the enum
		{FormatToolCall("nope", `{}`), false, false},
		{`{"name": "get_weather"}`, false, false},
		{"Hello", false, false},
		{weather + "; ", false, false},
	} {
		if got := matches(single, tc.text); got != tc.single {
			t.Errorf("single grammar on %s: %v, want %v", tc.text, got, tc.single)
		}
		if got := matches(parallel, tc.text); got != tc.parallel {
			t.Errorf("parallel grammar on %s: %v, want %v", tc.text, got, tc.parallel)
		}
	}
}

// TestToolCallGrammarErrors: what no relaxing serves (relax_test.go has
// the schemas relaxed instead).
func TestToolCallGrammarErrors(t *testing.T) {
	for _, tc := range []struct {
		tools []genq.Tool
		want  string
	}{
		{nil, "no tools"},
		{[]genq.Tool{tool("a", `{}`), tool("b", `{"$ref":"#/$defs/missing"}`)}, "tools[1].function.parameters: at #: $ref \"#/$defs/missing\" points to nothing"},
		{[]genq.Tool{tool("a", `{"type":`)}, "tools[0].function.parameters"},
	} {
		_, err := CompileToolCalls(tc.tools, true)
		if err == nil || genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), tc.want) {
			t.Errorf("%v: err = %v, want invalid with %q", tc.tools, err, tc.want)
		}
	}
}

func TestParseToolCalls(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []genq.ToolCallFunction
	}{
		{FormatToolCall("a", `{"x": 1}`), []genq.ToolCallFunction{{Name: "a", Arguments: `{"x": 1}`}}},
		{"  " + FormatToolCall("a", `{}`) + "; " + FormatToolCall("b", `{"y": [true]}`) + "\n", []genq.ToolCallFunction{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"y": [true]}`}}},
		{FormatToolCall("a", `{}`) + ";" + FormatToolCall("b", `{}`), []genq.ToolCallFunction{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{}`}}},
		{"The weather is fine.", nil},
		{`{"name": "a"}`, nil},
		{`{"name": "a", "parameters": 3}`, nil},
		{FormatToolCall("a", `{}`) + " and then", nil},
		{"", nil},
	} {
		got, ok := ParseToolCalls(tc.text)
		if ok != (tc.want != nil) || len(got) != len(tc.want) {
			t.Errorf("ParseToolCalls(%q) = %v, %v; want %v", tc.text, got, ok, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseToolCalls(%q)[%d] = %+v, want %+v", tc.text, i, got[i], tc.want[i])
			}
		}
	}
}

func TestFormatToolCalls(t *testing.T) {
	calls := []genq.ToolCall{
		{Function: genq.ToolCallFunction{Name: "a", Arguments: `{"x":1}`}},
		{Function: genq.ToolCallFunction{Name: "b", Arguments: ""}},
	}
	want := `{"name": "a", "parameters": {"x":1}}; {"name": "b", "parameters": {}}`
	if got := FormatToolCalls(calls); got != want {
		t.Errorf("FormatToolCalls = %s, want %s", got, want)
	}
	back, ok := ParseToolCalls(want)
	if !ok || len(back) != 2 || back[1].Arguments != "{}" {
		t.Errorf("the formatted calls parse back as %+v, %v", back, ok)
	}
}

func TestForJob(t *testing.T) {
	chat := []genq.Message{{Role: "user", Content: "hi"}}
	choice := func(mode, fn string) *genq.ToolChoice { return &genq.ToolChoice{Mode: mode, Function: fn} }
	no := false
	weather := FormatToolCall("get_weather", `{"city": "Oslo", "unit": "c"}`)
	twoCalls := weather + "; " + FormatToolCall("ping", `{}`)
	for _, tc := range []struct {
		name       string
		job        genq.Job
		free, lazy bool
		accepts    []string
		refuses    []string
		wantErr    string
	}{
		{name: "no constraint", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat}}, free: true},
		{name: "text format", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, ResponseFormat: &genq.ResponseFormat{Type: "text"}}}, free: true},
		{name: "tool_choice none", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: testTools, ToolChoice: choice("none", "")}}, free: true},
		{name: "json_object", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, ResponseFormat: &genq.ResponseFormat{Type: "json_object"}}},
			accepts: []string{`{"a": [1]}`}, refuses: []string{`[1]`, `"x"`}},
		{name: "json_schema", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, ResponseFormat: &genq.ResponseFormat{Type: "json_schema", JSONSchema: &genq.JSONSchema{Name: "n", Schema: json.RawMessage(`{"type":"integer"}`)}}}},
			accepts: []string{`42`}, refuses: []string{`4.2`, `{}`}},
		{name: "bad schema", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, ResponseFormat: &genq.ResponseFormat{Type: "json_schema", JSONSchema: &genq.JSONSchema{Schema: json.RawMessage(`{"type":"array","not":{"uniqueItems":true}}`)}}}},
			wantErr: `response_format.json_schema.schema: at #/not: not over "uniqueItems"`},
		{name: "auto", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: testTools}}, lazy: true, accepts: []string{weather, twoCalls}},
		{name: "required", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: testTools, ToolChoice: choice("required", "")}}, accepts: []string{weather, twoCalls}},
		{name: "required, one at a time", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: testTools, ToolChoice: choice("required", ""), ParallelToolCalls: &no}},
			accepts: []string{weather}, refuses: []string{twoCalls}},
		{name: "named", job: genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: testTools, ToolChoice: choice("", "ping")}},
			accepts: []string{FormatToolCall("ping", `{}`)}, refuses: []string{weather, twoCalls}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCache(8).ForJob(tc.job)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(genq.ErrorMessage(err), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.Grammar == nil) != tc.free || c.Lazy != tc.lazy || c.ToolCalls != (tc.job.ToolMode() != "") {
				t.Fatalf("constraint = %+v; want free %v, lazy %v", c, tc.free, tc.lazy)
			}
			for _, s := range tc.accepts {
				if !matches(c.Grammar, s) {
					t.Errorf("refuses %s", s)
				}
			}
			for _, s := range tc.refuses {
				if matches(c.Grammar, s) {
					t.Errorf("accepts %s", s)
				}
			}
		})
	}
}

// TestStrictClosesObjects: strict: true, on a response format or a tool,
// or the worker's setting (Cache.ClosedObjects), takes no property a
// schema does not list; without them an object takes others, as JSON
// Schema says.
func TestStrictClosesObjects(t *testing.T) {
	chat := []genq.Message{{Role: "user", Content: "hi"}}
	yes := true
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	format := func(strict *bool) genq.Job {
		return genq.Job{TextRequest: genq.TextRequest{Messages: chat, ResponseFormat: &genq.ResponseFormat{Type: "json_schema", JSONSchema: &genq.JSONSchema{Name: "n", Schema: schema, Strict: strict}}}}
	}
	tools := func(strict *bool) genq.Job {
		t := tool("f", string(schema))
		t.Function.Strict = strict
		return genq.Job{TextRequest: genq.TextRequest{Messages: chat, Tools: []genq.Tool{t}, ToolChoice: &genq.ToolChoice{Mode: "required"}}}
	}
	extra := map[bool]string{false: `{"a":1,"b":2}`, true: FormatToolCall("f", `{"a":1,"b":2}`)}
	cache := NewCache(8)
	closedCache := NewCache(8)
	closedCache.ClosedObjects = true
	for _, tc := range []struct {
		name   string
		cache  *Cache
		job    genq.Job
		isTool bool
		open   bool
	}{
		{"response format", cache, format(nil), false, true},
		{"response format, strict", cache, format(&yes), false, false},
		{"tool", cache, tools(nil), true, true},
		{"tool, strict", cache, tools(&yes), true, false},
		{"the worker's setting", closedCache, format(nil), false, false},
		{"the worker's setting, tools", closedCache, tools(nil), true, false},
	} {
		c, err := tc.cache.ForJob(tc.job)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := matches(c.Grammar, extra[tc.isTool]); got != tc.open {
			t.Errorf("%s: another property accepted %v, want %v", tc.name, got, tc.open)
		}
	}
}

func TestForJobCachesTools(t *testing.T) {
	cache := NewCache(8)
	job := genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: "user", Content: "x"}}, Tools: testTools}}
	a, err := cache.ForJob(job)
	if err != nil {
		t.Fatal(err)
	}
	described := append([]genq.Tool(nil), testTools...)
	described[0].Function.Description = "now described"
	job.Tools = described
	b, err := cache.ForJob(job)
	if err != nil {
		t.Fatal(err)
	}
	if a.Grammar != b.Grammar || cache.Len() != 1 {
		t.Errorf("the same tools compiled twice (cache holds %d)", cache.Len())
	}
}
