package structured

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/structured/vocabtest"
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

func matches(g *grammar.Grammar, text string) bool {
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
	weather := toolcall.FormatToolCall("get_weather", `{"city": "Oslo", "unit": "c"}`)
	tree := toolcall.FormatToolCall("tree", `{"kids": [{"kids": []}]}`)
	ping := toolcall.FormatToolCall("ping", `{}`)
	for _, tc := range []struct {
		text             string
		single, parallel bool
	}{
		{weather, true, true},
		{tree, true, true},
		{ping, true, true},
		{toolcall.FormatToolCall("pong", `{ }`), true, true},
		{toolcall.FormatToolCall("ping", `{"any": [1, 2]}`), false, false}, // an argument to a function that takes none
		{toolcall.FormatToolCall("pong", `{"a": 1}`), false, false},
		{weather + "; " + tree, false, true},
		{toolcall.FormatToolCall("get_weather", `{"city": "Oslo"}`), false, false},              // unit missing
		{toolcall.FormatToolCall("get_weather", `{"city": "Oslo", "unit": "k"}`), false, false}, // not in the enum
		{toolcall.FormatToolCall("nope", `{}`), false, false},
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

func TestForJob(t *testing.T) {
	chat := []genq.Message{{Role: "user", Content: "hi"}}
	choice := func(mode, fn string) *genq.ToolChoice { return &genq.ToolChoice{Mode: mode, Function: fn} }
	no := false
	weather := toolcall.FormatToolCall("get_weather", `{"city": "Oslo", "unit": "c"}`)
	twoCalls := weather + "; " + toolcall.FormatToolCall("ping", `{}`)
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
			accepts: []string{toolcall.FormatToolCall("ping", `{}`)}, refuses: []string{weather, twoCalls}},
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
	extra := map[bool]string{false: `{"a":1,"b":2}`, true: toolcall.FormatToolCall("f", `{"a":1,"b":2}`)}
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

// TestToolFormatsGrammarAndParse: each format's grammar accepts what it
// writes and Parse reads it back, one call or several; and refuses what is
// not its calls.
func TestToolFormatsGrammarAndParse(t *testing.T) {
	for _, f := range toolcall.ToolFormats() {
		t.Run(f.String(), func(t *testing.T) {
			single, err := CompileTools(f, testTools, false)
			if err != nil {
				t.Fatal(err)
			}
			parallel, err := CompileTools(f, testTools, true)
			if err != nil {
				t.Fatal(err)
			}
			weather := genq.ToolCall{ID: "a1B2c3D4e", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo", "unit": "c"}`}}
			tree := genq.ToolCall{ID: "f5G6h7I8j", Function: genq.ToolCallFunction{Name: "tree", Arguments: `{"kids": [{"kids": []}]}`}}
			bad := genq.ToolCall{ID: "a1B2c3D4e", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo", "unit": "k"}`}}
			for _, tc := range []struct {
				calls            []genq.ToolCall
				single, parallel bool
			}{
				{[]genq.ToolCall{weather}, true, true},
				{[]genq.ToolCall{tree}, true, true},
				{[]genq.ToolCall{weather, tree}, false, true},
				{[]genq.ToolCall{bad}, false, false},
				{[]genq.ToolCall{{ID: "x", Function: genq.ToolCallFunction{Name: "nope", Arguments: "{}"}}}, false, false},
			} {
				text := f.Write(tc.calls)
				if got := matches(single, text); got != tc.single {
					t.Errorf("single grammar on %s: %v, want %v", text, got, tc.single)
				}
				// A harmony answer makes one call: <|call|> ends it.
				if got, want := matches(parallel, text), tc.parallel && (f != toolcall.Harmony || len(tc.calls) == 1); got != want {
					t.Errorf("parallel grammar on %s: %v, want %v", text, got, want)
				}
				got, ok := f.Parse("\n " + text + "\n")
				if !ok || len(got) != len(tc.calls) {
					t.Fatalf("Parse(%q) = %v, %v", text, got, ok)
				}
				for i := range got {
					if got[i] != tc.calls[i].Function {
						t.Errorf("Parse(%q)[%d] = %+v, want %+v", text, i, got[i], tc.calls[i].Function)
					}
				}
			}
			for _, text := range []string{"", "Hello", f.Opener(), f.Write([]genq.ToolCall{weather}) + " and more", "<think>x</think>" + f.Write([]genq.ToolCall{weather})} {
				if matches(parallel, text) {
					t.Errorf("the grammar accepts %q", text)
				}
				if calls, ok := f.Parse(text); ok {
					t.Errorf("Parse(%q) = %v, true", text, calls)
				}
			}
		})
	}
}

// TestMistralIDs: a Mistral call's id is optional, and nine letters and
// digits when written; Parse accepts calls with or without one.
func TestMistralIDs(t *testing.T) {
	g, err := CompileTools(toolcall.Mistral, testTools, true)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`[TOOL_CALLS][{"name": "ping", "arguments": {}}]`:                                                       true,
		`[TOOL_CALLS][{"name": "ping", "arguments": {}, "id": "abcDEF123"}]`:                                    true,
		`[TOOL_CALLS][{"name": "ping", "arguments": {}, "id": "abcDEF12"}]`:                                     false,
		`[TOOL_CALLS][{"name": "ping", "arguments": {}, "id": "abc_EF123"}]`:                                    false,
		`[TOOL_CALLS][{"name": "ping", "arguments": {}}, {"name": "ping", "arguments": {}, "id": "A23456789"}]`: true,
	} {
		if got := matches(g, text); got != want {
			t.Errorf("grammar on %s: %v, want %v", text, got, want)
		}
		if calls, ok := toolcall.Mistral.Parse(text); ok != (want || strings.Contains(text, `"id"`)) || (ok && calls[0].Name != "ping") {
			t.Errorf("Parse(%s) = %v, %v", text, calls, ok)
		}
	}
}

// openingVocab is testVocab with what tool-calling answers are made of:
// the formats' openers whole (special tokens) and in pieces, the reasoning
// tags, and prose that starts like them.
func openingVocab() ([][]byte, int32) {
	toks, eos := vocabtest.Small()
	toks = toks[:eos]
	for _, p := range []string{
		"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<think>", "</think>", "<tool", "_call", "<t", "hink", "think>",
		"[TOOL", "_CALLS", "]", "[{", " [", "\n<", "<b>", "<th", "\n\n", "\n{", " {", `{"name": "`, "[TOOL_CALLS][{", "</think>\n\n",
		"get_weather", "ping", "tree", "kids", "city", "Oslo", `"id": "`, "abc", "DEF123", "Hmm", " so", ">\n{",
	} {
		toks = append(toks, []byte(p))
	}
	toks = append(toks, []byte("<eos>"))
	return toks, int32(len(toks) - 1)
}

// TestOpeningWalks generates answers under each dialect's constraint, lazy
// and required, the way the sampler will: while the answer is Waiting the
// next token comes from Opening.Mask, which must equal a token-by-token
// check; inside a reasoning block and in prose any token goes; once the
// calls begin, the grammar's mask. Every answer that ends as calls must
// parse, and the stream reader must read the same calls from it.
func TestOpeningWalks(t *testing.T) {
	toks, eos := openingVocab()
	v := grammar.NewVocab(toks, []int32{eos})
	cache := NewCache(8)
	for _, d := range []toolcall.Dialect{{Format: toolcall.Llama3JSON, Reasoning: false}, {Format: toolcall.Hermes, Reasoning: false}, {Format: toolcall.Hermes, Reasoning: true}, {Format: toolcall.Mistral, Reasoning: false}, {Format: toolcall.Llama3JSON, Reasoning: true}, {Format: toolcall.Harmony, Reasoning: false}} {
		for _, lazy := range []bool{true, false} {
			if !lazy && !d.Reasoning {
				continue // bound from the first byte: no Opening
			}
			job := genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: "user", Content: "x"}}, Tools: testTools}}
			if !lazy {
				job.ToolChoice = &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
			}
			c, err := cache.ForJobIn(job, d)
			if err != nil {
				t.Fatal(err)
			}
			name := d.String() + map[bool]string{true: ", lazy", false: ", required"}[lazy]
			t.Run(name, func(t *testing.T) {
				seen := map[grammar.Phase]int{}
				for seed := uint64(0); seed < 300; seed++ {
					walkOpening(t, c, v, toks, eos, rand.New(rand.NewPCG(seed, 9)), seen)
				}
				t.Logf("answers ending: %v", seen)
				if seen[grammar.Calls] == 0 || (lazy && seen[grammar.Prose] == 0) {
					t.Errorf("the walks never ended in calls, or (lazy) never in prose: %v", seen)
				}
			})
		}
	}
}

func walkOpening(t *testing.T, c Constraint, v *grammar.Vocab, toks [][]byte, eos int32, rng *rand.Rand, seen map[grammar.Phase]int) {
	t.Helper()
	o := c.NewOpening()
	if o == nil {
		t.Fatal("no opening for a lazy or reasoning constraint")
	}
	start := c.Grammar.NewMatcher()
	m := start.Clone()
	mask := make([]uint64, (v.Size()+63)/64)
	var out []byte
	pick := func(ids []int32) int32 { return ids[rng.IntN(len(ids))] }
	thinkSteps := 0
	for step := 0; step < 80; step++ {
		var id int32
		switch o.Phase() {
		case grammar.Waiting:
			o.Mask(start, v, mask)
			checkOpeningMask(t, o, start, mask, toks, eos, c.Lazy, string(out))
			ids := vocabtest.Allowed(mask)
			if len(ids) == 0 {
				t.Fatalf("empty mask while waiting, after %q", out)
			}
			// Steer towards openings: prefer tokens that do not make the
			// answer prose.
			var opening []int32
			for _, id := range ids {
				if id == eos {
					continue
				}
				if ph, _ := copyOpening(o).Feed(toks[id]); ph != grammar.Prose {
					opening = append(opening, id)
				}
			}
			id = pick(ids)
			if len(opening) > 0 && rng.IntN(5) > 0 {
				id = pick(opening)
			}
		case grammar.Thinking:
			thinkSteps++
			words := []string{"Hmm", " so", " {", "<tool_call>", "<t", "\n\n"}
			w := words[rng.IntN(len(words))]
			if thinkSteps > 3 && rng.IntN(3) == 0 {
				w = "</think>"
			}
			id = tokenID(t, toks, w)
		case grammar.Prose:
			seen[grammar.Prose]++
			return
		case grammar.Calls:
			m.Mask(v, mask)
			ids := vocabtest.Allowed(mask)
			if len(ids) == 0 {
				t.Fatalf("empty grammar mask after %q", out)
			}
			id = pick(ids)
			if id == eos {
				text := string(out)
				calls, ok := c.Dialect.Parse(text)
				if !ok {
					t.Fatalf("an answer the grammar accepts does not parse: %q", text)
				}
				checkStreamReads(t, text, calls)
				seen[grammar.Calls]++
				return
			}
			if !m.Advance(toks[id]) {
				t.Fatalf("the mask allowed %q after %q; the matcher refuses it", toks[id], out)
			}
			out = append(out, toks[id]...)
			continue
		}
		if id == eos {
			if !c.Lazy {
				t.Fatalf("a required answer may end while %s, after %q", o.Phase(), out)
			}
			seen[grammar.Waiting]++
			return
		}
		ph, callBytes := o.Feed(toks[id])
		out = append(out, toks[id]...)
		if ph == grammar.Calls && !m.Advance(callBytes) {
			if o.Phase() == grammar.Calls && strings.Contains(string(toks[id]), toolcall.ThinkClose) {
				return // a token that closed the reasoning and went on, unmasked: the documented limit
			}
			t.Fatalf("the opening began the calls with %q (after %q), which the grammar refuses", callBytes, out)
		}
	}
	seen[grammar.Thinking]++ // ran out of steps
}

func copyOpening(o *grammar.Opening) *grammar.Opening { c := *o; return &c }

func tokenID(t *testing.T, toks [][]byte, s string) int32 {
	t.Helper()
	for id, tok := range toks {
		if string(tok) == s {
			return int32(id)
		}
	}
	t.Fatalf("no token %q", s)
	return -1
}

// checkOpeningMask checks a waiting mask token by token: a token is allowed
// when, fed to a copy of the opening, it keeps the answer waiting, opens
// the reasoning block, makes it prose (lazy only), or begins the calls with
// bytes the grammar takes; the end when the answer may be prose.
func checkOpeningMask(t *testing.T, o *grammar.Opening, start *grammar.Matcher, mask []uint64, toks [][]byte, eos int32, lazy bool, after string) {
	t.Helper()
	for id, tok := range toks {
		want := false
		switch {
		case int32(id) == eos:
			want = lazy
		case len(tok) > 0:
			switch ph, callBytes := copyOpening(o).Feed(tok); ph {
			case grammar.Waiting, grammar.Thinking:
				want = true
			case grammar.Prose:
				want = lazy
			case grammar.Calls:
				want = start.Clone().Advance(callBytes)
			}
		}
		if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
			t.Fatalf("after %q: token %q: mask says %v, a token-by-token check %v", after, tok, got, want)
		}
	}
}

// checkStreamReads reads text through a CallStream cut at random and wants
// calls.
func checkStreamReads(t *testing.T, text string, want []genq.ToolCallFunction) {
	t.Helper()
	s := toolcall.NewCallStream(true)
	rng := rand.New(rand.NewPCG(uint64(len(text)), 1))
	var events []toolcall.CallEvent
	for rest := text; rest != ""; {
		n := min(len(rest), 1+rng.IntN(5))
		events = append(events, s.Write(rest[:n])...)
		rest = rest[n:]
	}
	events = append(events, s.Close()...)
	content, calls := toolcall.Join(events)
	if content != "" || len(calls) != len(want) {
		t.Fatalf("the stream reads %q as content %q, calls %+v; want %+v", text, content, calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("the stream reads %q: call %d = %+v, want %+v", text, i, calls[i], want[i])
		}
	}
}

// The calls the harmony grammar is tried on; toolcall's tests write the
// same calls, but test files do not cross packages.
var (
	weatherCall = genq.ToolCall{ID: "a1B2c3D4e", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo \"}\" {", "unit": "c"}`}}
	pingCall    = genq.ToolCall{ID: "call_0123456789abcdef_1", Type: "function", Function: genq.ToolCallFunction{Name: "ping", Arguments: `{}`}}
)

// TestHarmonyDialect: a harmony dialect reasons on channels, keeps the
// text of the headers' tokens, and makes one call per answer whatever
// parallel_tool_calls says.
func TestHarmonyDialect(t *testing.T) {
	d := toolcall.Dialect{Format: toolcall.Harmony}
	if !d.Channels() || (toolcall.Dialect{Format: toolcall.Hermes, Reasoning: true}).Channels() {
		t.Error("Channels: want harmony's alone")
	}
	kept := map[string]bool{}
	for _, tok := range d.PreservedTokens() {
		kept[tok] = true
	}
	for _, tok := range toolcall.HarmonyTokens() {
		if !kept[tok] {
			t.Errorf("%s is not preserved", tok)
		}
	}
	g, err := CompileTools(toolcall.Harmony, testTools, true)
	if err != nil {
		t.Fatal(err)
	}
	one := toolcall.Harmony.Write([]genq.ToolCall{weatherCall})
	if !matches(g, one) || matches(g, toolcall.Harmony.Write([]genq.ToolCall{weatherCall, pingCall})) {
		t.Errorf("the grammar of parallel calls: one %v, two %v; want one only", matches(g, one), !matches(g, one))
	}
}

// TestStrictToolFormatsAfterAnnotatingOnes: a strict tool holds hostname
// and regex to its patterns, and a tool that takes them as annotations (a
// 2020-12 schema that is not strict) does not, in either order on one
// compile: a format's pattern is written once per compile and mode.
func TestStrictToolFormatsAfterAnnotatingOnes(t *testing.T) {
	yes, no := true, false
	for _, format := range []string{"hostname", "regex"} {
		body := `"type":"object","properties":{"h":{"type":"string","format":"` + format + `"}},"required":["h"],"additionalProperties":false}`
		loose := tool("loose", `{"$schema":"https://json-schema.org/draft/2020-12/schema",`+body)
		loose.Function.Strict = &no
		strict := tool("strict", `{`+body)
		strict.Function.Strict = &yes
		bad := map[string]string{"hostname": `-not a host-`, "regex": `(`}[format]
		for _, tools := range [][]genq.Tool{{loose, strict}, {strict, loose}} {
			g, err := CompileToolCalls(tools, false)
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			if matches(g, toolcall.FormatToolCall("strict", `{"h":"`+bad+`"}`)) {
				t.Errorf("%s, %s first: the strict tool took %q", format, tools[0].Function.Name, bad)
			}
			if !matches(g, toolcall.FormatToolCall("loose", `{"h":"`+bad+`"}`)) {
				t.Errorf("%s, %s first: the annotating tool refused %q", format, tools[0].Function.Name, bad)
			}
		}
	}
}
