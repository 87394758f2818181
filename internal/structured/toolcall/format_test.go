package toolcall

import (
	"math/rand/v2"
	"slices"
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
				events := feed(s, tc.text, split, rand.New(rand.NewPCG(3, 4)))
				content, calls := Join(events)
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
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("ParseToolCalls(%q) = %+v, %v; want %+v", tc.text, got, ok, tc.want)
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
