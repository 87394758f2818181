package structured

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

var (
	weatherCall = genq.ToolCall{ID: "a1B2c3D4e", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo \"}\" {", "unit": "c"}`}}
	pingCall    = genq.ToolCall{ID: "call_0123456789abcdef_1", Type: "function", Function: genq.ToolCallFunction{Name: "ping", Arguments: `{}`}}
)

// TestToolFormatsWrite: each format writes calls as its models do.
func TestToolFormatsWrite(t *testing.T) {
	calls := []genq.ToolCall{weatherCall, pingCall}
	pingID := Mistral.CallID(pingCall.ID)
	for _, tc := range []struct {
		f    ToolFormat
		want string
	}{
		{Llama3JSON, `{"name": "get_weather", "parameters": {"city": "Oslo \"}\" {", "unit": "c"}}; {"name": "ping", "parameters": {}}`},
		{Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo \\\"}\\\" {\", \"unit\": \"c\"}}\n</tool_call>\n" +
			"<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"},
		{Mistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo \"}\" {", "unit": "c"}, "id": "a1B2c3D4e"}, ` +
			`{"name": "ping", "arguments": {}, "id": "` + pingID + `"}]`},
	} {
		if got := tc.f.Write(calls); got != tc.want {
			t.Errorf("%s writes\n%s\nwant\n%s", tc.f, got, tc.want)
		}
	}
}

// TestMistralCallID: Mistral's templates take ids of nine letters and
// digits; others are mapped to such an id, the same one each time.
func TestMistralCallID(t *testing.T) {
	if got := Mistral.CallID("a1B2c3D4e"); got != "a1B2c3D4e" {
		t.Errorf("a Mistral id is changed: %s", got)
	}
	id := Mistral.CallID("call_0123456789abcdef_1")
	if !isMistralID(id) || id != Mistral.CallID("call_0123456789abcdef_1") || id == Mistral.CallID("call_0123456789abcdef_2") {
		t.Errorf("mapped id %q: want nine letters and digits, the same for the same id, another for another", id)
	}
	if got := Hermes.CallID("call_1"); got != "call_1" {
		t.Errorf("Hermes changes ids: %s", got)
	}
}

// TestToolFormatsGrammarAndParse: each format's grammar accepts what it
// writes and Parse reads it back, one call or several; and refuses what is
// not its calls.
func TestToolFormatsGrammarAndParse(t *testing.T) {
	for _, f := range ToolFormats() {
		t.Run(f.String(), func(t *testing.T) {
			single, err := f.Compile(testTools, false)
			if err != nil {
				t.Fatal(err)
			}
			parallel, err := f.Compile(testTools, true)
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
				if got, want := matches(parallel, text), tc.parallel && (f != Harmony || len(tc.calls) == 1); got != want {
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
	g, err := Mistral.Compile(testTools, true)
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
		if calls, ok := Mistral.Parse(text); ok != (want || strings.Contains(text, `"id"`)) || (ok && calls[0].Name != "ping") {
			t.Errorf("Parse(%s) = %v, %v", text, calls, ok)
		}
	}
}

// TestDialectParse: a dialect with reasoning reads calls after a leading
// reasoning block; one without does not.
func TestDialectParse(t *testing.T) {
	text := "\n<think>\nThe user wants the weather.\n</think>\n\n" + Hermes.Write([]genq.ToolCall{weatherCall})
	if calls, ok := (Dialect{Format: Hermes, Reasoning: true}).Parse(text); !ok || len(calls) != 1 || calls[0] != weatherCall.Function {
		t.Errorf("Parse = %v, %v", calls, ok)
	}
	if _, ok := (Dialect{Format: Hermes}).Parse(text); ok {
		t.Error("a dialect without reasoning reads calls after a reasoning block")
	}
	if got := (Dialect{Format: Mistral, Reasoning: true}).PreservedTokens(); strings.Join(got, " ") != "[TOOL_CALLS] <think> </think>" {
		t.Errorf("PreservedTokens = %v", got)
	}
}

// TestCallStreamFormats: the stream reader tells every format by its
// opener, with or without a reasoning block first, and its events join
// into the calls Parse reads from the whole answer, however the text is
// cut; prose, and prose after reasoning, is content whole.
func TestCallStreamFormats(t *testing.T) {
	const think = "<think>\nHmm, {\"name\": \"x\"} <tool_call> [TOOL_CALLS]\n</think>\n\n"
	type tcase struct {
		name      string
		text      string
		calls     []genq.ToolCallFunction // nil: the text is content
		reasoning string
	}
	var cases []tcase
	for _, f := range ToolFormats() {
		calls := f.Write([]genq.ToolCall{weatherCall, pingCall})
		want, ok := f.Parse(calls)
		if !ok {
			t.Fatalf("%s: its own calls do not parse", f)
		}
		cases = append(cases,
			tcase{f.String() + " calls", calls, want, ""},
			tcase{f.String() + " calls after whitespace", "\n  " + calls, want, ""},
			tcase{f.String() + " calls after reasoning", think + calls, want, think},
			tcase{f.String() + " opener, then prose", f.Opener() + " is how it starts", nil, ""},
		)
	}
	cases = append(cases,
		tcase{"prose", "It is sunny {really}.", nil, ""},
		tcase{"markup prose", "<b>Sunny</b> [1]", nil, ""},
		tcase{"a brace that is not a call", `{"weather": 1}`, nil, ""},
		tcase{"prose after reasoning", think + "It is sunny.", nil, ""},
		tcase{"reasoning cut short", "<think>still thinking", nil, ""},
		tcase{"a second reasoning block is prose", think + think, nil, ""},
	)
	for _, tc := range cases {
		for _, split := range []string{"whole", "bytes", "random"} {
			t.Run(tc.name+", "+split, func(t *testing.T) {
				s := NewCallStream(true)
				var events []CallEvent
				rng := rand.New(rand.NewPCG(3, 4))
				for rest := tc.text; rest != ""; {
					n := len(rest)
					switch split {
					case "bytes":
						n = 1
					case "random":
						n = min(len(rest), 1+rng.IntN(6))
					}
					events = append(events, s.Write(rest[:n])...)
					rest = rest[n:]
				}
				events = append(events, s.Close()...)
				content, calls := joined(events)
				var reasoning string
				for _, e := range events {
					reasoning += e.Reasoning
				}
				if tc.calls == nil {
					if content != tc.text || len(calls) > 0 || s.Calls() {
						t.Fatalf("content %q, calls %v; want content %q", content, calls, tc.text)
					}
					return
				}
				if content != "" || reasoning != tc.reasoning || len(calls) != len(tc.calls) || !s.Calls() {
					t.Fatalf("content %q, reasoning %q, calls %+v; want reasoning %q, calls %+v", content, reasoning, calls, tc.reasoning, tc.calls)
				}
				for i := range calls {
					if calls[i] != tc.calls[i] {
						t.Errorf("call %d = %+v, want %+v", i, calls[i], tc.calls[i])
					}
				}
			})
		}
	}
}

// openingVocab is testVocab with what tool-calling answers are made of:
// the formats' openers whole (special tokens) and in pieces, the reasoning
// tags, and prose that starts like them.
func openingVocab() ([][]byte, int32) {
	toks, eos := testVocab()
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
	v := NewVocab(toks, []int32{eos})
	cache := NewCache(8)
	for _, d := range []Dialect{{Llama3JSON, false}, {Hermes, false}, {Hermes, true}, {Mistral, false}, {Llama3JSON, true}, {Harmony, false}} {
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
				seen := map[Phase]int{}
				for seed := uint64(0); seed < 300; seed++ {
					walkOpening(t, c, v, toks, eos, rand.New(rand.NewPCG(seed, 9)), seen)
				}
				t.Logf("answers ending: %v", seen)
				if seen[Calls] == 0 || (lazy && seen[Prose] == 0) {
					t.Errorf("the walks never ended in calls, or (lazy) never in prose: %v", seen)
				}
			})
		}
	}
}

func walkOpening(t *testing.T, c Constraint, v *Vocab, toks [][]byte, eos int32, rng *rand.Rand, seen map[Phase]int) {
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
		case Waiting:
			o.Mask(start, v, mask)
			checkOpeningMask(t, o, start, mask, toks, eos, c.Lazy, string(out))
			ids := allowed(mask)
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
				if ph, _ := copyOpening(o).Feed(toks[id]); ph != Prose {
					opening = append(opening, id)
				}
			}
			id = pick(ids)
			if len(opening) > 0 && rng.IntN(5) > 0 {
				id = pick(opening)
			}
		case Thinking:
			thinkSteps++
			words := []string{"Hmm", " so", " {", "<tool_call>", "<t", "\n\n"}
			w := words[rng.IntN(len(words))]
			if thinkSteps > 3 && rng.IntN(3) == 0 {
				w = "</think>"
			}
			id = tokenID(t, toks, w)
		case Prose:
			seen[Prose]++
			return
		case Calls:
			m.Mask(v, mask)
			ids := allowed(mask)
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
				seen[Calls]++
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
			seen[Waiting]++
			return
		}
		ph, callBytes := o.Feed(toks[id])
		out = append(out, toks[id]...)
		if ph == Calls && !m.Advance(callBytes) {
			if o.Phase() == Calls && strings.Contains(string(toks[id]), ThinkClose) {
				return // a token that closed the reasoning and went on, unmasked: the documented limit
			}
			t.Fatalf("the opening began the calls with %q (after %q), which the grammar refuses", callBytes, out)
		}
	}
	seen[Thinking]++ // ran out of steps
}

func copyOpening(o *Opening) *Opening { c := *o; return &c }

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
func checkOpeningMask(t *testing.T, o *Opening, start *Matcher, mask []uint64, toks [][]byte, eos int32, lazy bool, after string) {
	t.Helper()
	for id, tok := range toks {
		want := false
		switch {
		case int32(id) == eos:
			want = lazy
		case len(tok) > 0:
			switch ph, callBytes := copyOpening(o).Feed(tok); ph {
			case Waiting, Thinking:
				want = true
			case Prose:
				want = lazy
			case Calls:
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
	s := NewCallStream(true)
	rng := rand.New(rand.NewPCG(uint64(len(text)), 1))
	var events []CallEvent
	for rest := text; rest != ""; {
		n := min(len(rest), 1+rng.IntN(5))
		events = append(events, s.Write(rest[:n])...)
		rest = rest[n:]
	}
	events = append(events, s.Close()...)
	content, calls := joined(events)
	if content != "" || len(calls) != len(want) {
		t.Fatalf("the stream reads %q as content %q, calls %+v; want %+v", text, content, calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("the stream reads %q: call %d = %+v, want %+v", text, i, calls[i], want[i])
		}
	}
}

// TestFormatsGrammarWarmsTheirRules: once FormatsGrammar is prepared for a
// vocabulary, a schema's format rules find every mask worked out.
func TestFormatsGrammarWarmsTheirRules(t *testing.T) {
	toks, eos := testVocab()
	v := NewVocab(toks, []int32{eos})
	if done, err := FormatsGrammar().Prepare(context.Background(), v, 0); err != nil || !done {
		t.Fatalf("Prepare: %v, %v", done, err)
	}
	for _, f := range []string{"date", "date-time", "time", "duration", "uuid", "email", "ipv4", "ipv6"} {
		g, err := Compile([]byte(`{"type":"object","properties":{"x":{"type":"string","format":"` + f + `"}},"required":["x"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(g.sharedRules) == 0 {
			t.Fatalf("%s: no shared rule", f)
		}
		for _, r := range g.sharedRules {
			tab := v.sharedTable(r)
			for n := r.first; n < r.end; n++ {
				if len(g.nodes[n].edges) > 0 && tab.masks[n-r.first].Load() == nil {
					t.Fatalf("%s: node %d of %s has no mask", f, n, r.key)
				}
			}
		}
	}
}
