package chattemplate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/tinygguf"
)

// llama3Special are the tiny models' special tokens: Llama 3's, the
// tokenizer adding BOS.
var llama3Special = SpecialTokens{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>", AddBOS: true}

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var weatherTool = genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "get_weather", Description: "Weather <now> & here",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}

// TestLlama31Way: Meta's Llama 3 template (the tiny models') renders no
// tools, so genq writes them into the conversation as Llama 3.1's template
// does, and holds the answer to Llama3JSON; the tokenizer's BOS is cut.
func TestLlama31Way(t *testing.T) {
	tmpl, err := New(tinygguf.Llama3ChatTemplate, llama3Special)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.RendersTools() || tmpl.ToolFormat() != toolcall.Llama3JSON || tmpl.Dialect().Reasoning {
		t.Fatalf("RendersTools %v, dialect %s; want the Llama 3.1 way, llama3-json", tmpl.RendersTools(), tmpl.Dialect())
	}
	const toolJSON = `{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather <now> & here",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string"
                }
            },
            "required": [
                "city"
            ]
        }
    }
}`
	const guidance = "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
		`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.` + "\n\n"
	const sys = "<|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
	const answer = "<|start_header_id|>assistant<|end_header_id|>\n\n"
	call := genq.ToolCall{ID: "call_1", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}
	for _, tc := range []struct {
		name  string
		msgs  []genq.Message
		tools []genq.Tool
		want  string
	}{
		{
			"tools go into the first user message",
			[]genq.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: " Weather in Oslo? "}, {Role: "assistant", Content: "Which unit?"}, {Role: "user", Content: "Celsius."}},
			[]genq.Tool{weatherTool},
			sys + "<|start_header_id|>user<|end_header_id|>\n\n" + guidance + toolJSON + "\n\nWeather in Oslo?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nWhich unit?<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nCelsius.<|eot_id|>" + answer,
		},
		{
			"earlier calls as the model writes them, results as ipython turns",
			[]genq.Message{
				{Role: "system", Content: "sys"},
				{Role: "user", Content: "Weather in Oslo and Bergen?"},
				{Role: "assistant", ToolCalls: []genq.ToolCall{call, {ID: "call_2", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Bergen"}`}}}},
				{Role: "tool", ToolCallID: "call_1", Content: `{"temp": 3}`},
				{Role: "tool", ToolCallID: "call_2", Content: `{"temp": 5}`},
			},
			nil,
			sys + "<|start_header_id|>user<|end_header_id|>\n\nWeather in Oslo and Bergen?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n" + `{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_weather", "parameters": {"city":"Bergen"}}` + "<|eot_id|>" +
				"<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 3}<|eot_id|>" +
				"<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 5}<|eot_id|>" + answer,
		},
		{
			"a chat with no user message gets the tools in a turn of their own",
			[]genq.Message{{Role: "system", Content: "sys"}},
			[]genq.Tool{weatherTool},
			sys + "<|start_header_id|>user<|end_header_id|>\n\n" + guidance + toolJSON + "<|eot_id|>" + answer,
		},
		{
			"no tools: the template's own rendering, content trimmed by it",
			[]genq.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: " Hi {{ x }} "}},
			nil,
			sys + "<|start_header_id|>user<|end_header_id|>\n\nHi {{ x }}<|eot_id|>" + answer,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(tc.msgs, tc.tools)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("rendered\n%q\nwant\n%q", got, tc.want)
			}
		})
	}

	keep, err := New(tinygguf.Llama3ChatTemplate, SpecialTokens{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := keep.Render([]genq.Message{{Role: "user", Content: "Hi"}}, nil); !strings.HasPrefix(got, "<|begin_of_text|><|start_header_id|>user") {
		t.Errorf("a tokenizer that adds no BOS gets the template's: %q", got)
	}
}

// TestDialects: the format each family's template writes calls in, found
// by rendering one, and whether its answers may open with a <think> block.
func TestDialects(t *testing.T) {
	for name, want := range map[string]toolcall.Dialect{
		"meta-llama-Llama-3.1-8B-Instruct":            {Format: toolcall.Llama3JSON},
		"meta-llama-Llama-3.3-70B-Instruct":           {Format: toolcall.Llama3JSON},
		"Qwen-Qwen2.5-7B-Instruct":                    {Format: toolcall.Hermes},
		"Qwen-Qwen3-0.6B":                             {Format: toolcall.Hermes, Reasoning: true},
		"Qwen-QwQ-32B":                                {Format: toolcall.Hermes, Reasoning: true},
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use": {Format: toolcall.Hermes},
		"mistralai-Mistral-Nemo-Instruct-2407":        {Format: toolcall.Mistral},
		"openai-gpt-oss-120b":                         {Format: toolcall.Harmony},
	} {
		tmpl, err := New(readTemplate(t, name), llama3Special)
		if err != nil {
			t.Fatal(err)
		}
		if !tmpl.RendersTools() || tmpl.Dialect() != want {
			t.Errorf("%s: RendersTools %v, dialect %s; want %s", name, tmpl.RendersTools(), tmpl.Dialect(), want)
		}
	}
	// Qwen3-Coder writes XML calls, which genq does not parse: its tools
	// go the Llama 3.1 way.
	coder, err := New(readTemplate(t, "Qwen3-Coder"), llama3Special)
	if err != nil {
		t.Fatal(err)
	}
	if coder.RendersTools() || coder.ToolFormat() != toolcall.Llama3JSON {
		t.Errorf("Qwen3-Coder: RendersTools %v, format %s", coder.RendersTools(), coder.ToolFormat())
	}
}

// TestMistralIDs: Mistral Nemo's template refuses call ids other than nine
// letters and digits; genq's own ids (genq.ToolCallID) are longer, so the
// template gets ids derived from them, the same for a call and its result.
func TestMistralIDs(t *testing.T) {
	tmpl, err := New(readTemplate(t, "mistralai-Mistral-Nemo-Instruct-2407"), llama3Special)
	if err != nil {
		t.Fatal(err)
	}
	id := genq.ToolCallID("0a1b-2c3d", 0)
	msgs := []genq.Message{
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", ToolCalls: []genq.ToolCall{{ID: id, Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}}},
		{Role: "tool", ToolCallID: id, Content: "3"},
	}
	got, err := tmpl.Render(msgs, []genq.Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	short := toolcall.Mistral.CallID(id)
	if !strings.Contains(got, `"id": "`+short+`"}]`) || !strings.Contains(got, `"call_id": "`+short+`"}`) {
		t.Errorf("the call and its result do not carry %s:\n%s", short, got)
	}
}

// TestRenderErrors: a template that refuses a conversation
// (raise_exception) or cannot render it fails the request as invalid, with
// the template's reason; a template that cannot be compiled or run fails
// New.
func TestRenderErrors(t *testing.T) {
	llama, err := New(readTemplate(t, "meta-llama-Llama-3.1-8B-Instruct"), llama3Special)
	if err != nil {
		t.Fatal(err)
	}
	two := []genq.Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []genq.ToolCall{
		{ID: "a", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: "{}"}},
		{ID: "b", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: "{}"}}}}}
	_, err = llama.Render(two, []genq.Tool{weatherTool})
	if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), "This model only supports single tool-calls at once!") {
		t.Errorf("two calls in one Llama 3.1 turn: err = %v, want invalid with the template's reason", err)
	}
	notJSON := []genq.Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []genq.ToolCall{
		{ID: "a", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: "{city"}}}}}
	if _, err := llama.Render(notJSON, nil); genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), "messages[1].tool_calls[0].function.arguments") {
		t.Errorf("arguments that are not JSON: err = %v, want invalid naming them", err)
	}
	for src, want := range map[string]string{
		"":                            "no chat template",
		"{% for m in messages %}":     "cannot be compiled",
		"{{ raise_exception('no') }}": "cannot render a one-message chat",
	} {
		if _, err := New(src, llama3Special); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q): err = %v, want %q", src, err, want)
		}
	}
}

// TestClock: the date a template writes comes from the template's clock.
func TestClock(t *testing.T) {
	day := time.Date(2025, 3, 7, 9, 30, 0, 0, time.Local)
	tmpl, err := New(readTemplate(t, "meta-llama-Llama-3.2-3B-Instruct"), llama3Special, WithClock(func() time.Time { return day }))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]genq.Message{{Role: "user", Content: "Hi"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "Today Date: 07 Mar 2025\n") {
		t.Errorf("rendered %q; want today's date 07 Mar 2025", got)
	}
	if got := strftime("%Y-%m-%d %H:%M:%S %a %A %b %B %j %I%p %e %%", day); got != "2025-03-07 09:30:00 Fri Friday Mar March 066 09AM  7 %" {
		t.Errorf("strftime = %q", got)
	}
}

// TestTojsonIndent: Llama 3.1's tojson(indent=4) keeps keys in order and
// characters as they are, as Python's json.dumps(indent=4,
// ensure_ascii=False) and llama.cpp's engine write them.
func TestTojsonIndent(t *testing.T) {
	tmpl, err := New(`{{ messages[0].content }}{% for t in tools %}{{ t | tojson(indent=2) }}{% endfor %}`, SpecialTokens{})
	if err != nil {
		t.Fatal(err)
	}
	tool := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "z", Description: "<é> & \"q\"\n",
		Parameters: json.RawMessage(`{"b": 1, "a": [1.5, true, null, {}], "c": []}`)}}
	got, err := tmpl.render([]genq.Message{{Role: "user", Content: "x"}}, []genq.Tool{tool})
	if err != nil {
		t.Fatal(err)
	}
	want := "x{\n  \"type\": \"function\",\n  \"function\": {\n    \"name\": \"z\",\n    \"description\": \"<é> & \\\"q\\\"\\n\",\n" +
		"    \"parameters\": {\n      \"b\": 1,\n      \"a\": [\n        1.5,\n        true,\n        null,\n        {}\n      ],\n      \"c\": []\n    }\n  }\n}"
	if got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
}

// TestConcurrentRenders: one Template serves many requests at once.
func TestConcurrentRenders(t *testing.T) {
	tmpl, err := New(readTemplate(t, "Qwen-Qwen3-0.6B"), llama3Special)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []genq.Message{{Role: "user", Content: "Weather?"}}
	want, err := tmpl.Render(msgs, []genq.Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				got, err := tmpl.Render(msgs, []genq.Tool{weatherTool})
				if err == nil && got != want {
					err = errors.New("a concurrent render differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
