package textgen

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ollama/ollama/template"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

func TestRenderToolsTheLlama31Way(t *testing.T) {
	tmpl, err := newChatTemplate(tinygguf.Llama3ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.rendersTools {
		t.Fatalf("%s renders tools itself; this test is for one that does not", tmpl.name)
	}
	tool := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "get_weather", Description: "Weather <now> & here",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
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
	tests := []struct {
		name  string
		msgs  []genq.Message
		tools []genq.Tool
		want  string
	}{
		{
			"tools go into the first user message",
			[]genq.Message{{Role: genq.RoleUser, Content: " Weather in Oslo? "}, {Role: genq.RoleAssistant, Content: "Which unit?"}, {Role: genq.RoleUser, Content: "Celsius."}},
			[]genq.Tool{tool},
			sys + "<|start_header_id|>user<|end_header_id|>\n\n" + guidance + toolJSON + "\n\nWeather in Oslo?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nWhich unit?<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nCelsius.<|eot_id|>" + answer,
		},
		{
			"earlier calls as the model writes them, results as ipython turns",
			[]genq.Message{
				{Role: genq.RoleUser, Content: "Weather in Oslo and Bergen?"},
				{Role: genq.RoleAssistant, ToolCalls: []genq.ToolCall{call, {ID: "call_2", Type: "function", Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Bergen"}`}}}},
				{Role: genq.RoleTool, ToolCallID: "call_1", Content: `{"temp": 3}`},
				{Role: genq.RoleTool, ToolCallID: "call_2", Content: `{"temp": 5}`},
			},
			nil,
			sys + "<|start_header_id|>user<|end_header_id|>\n\nWeather in Oslo and Bergen?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n" + `{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_weather", "parameters": {"city":"Bergen"}}` + "<|eot_id|>" +
				// ollama's templates join consecutive turns of a role
				// other than "tool": the results share an ipython turn.
				"<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 3}\n\n{\"temp\": 5}<|eot_id|>" + answer,
		},
		{
			"a chat with no user message gets the tools in a turn of their own",
			[]genq.Message{{Role: genq.RoleSystem, Content: "sys"}},
			[]genq.Tool{tool},
			sys + "<|start_header_id|>user<|end_header_id|>\n\n" + guidance + toolJSON + "<|eot_id|>" + answer,
		},
		{
			"no tools, no change",
			[]genq.Message{{Role: genq.RoleUser, Content: "Hi"}},
			nil,
			sys + "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" + answer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tmpl.RenderChat("sys", tt.msgs, tt.tools)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("rendered\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestRenderToolsWithTheTemplatesOwn: a template that renders tools gets
// them, the calls and the tool turns as ollama's values carry them.
func TestRenderToolsWithTheTemplatesOwn(t *testing.T) {
	parsed, err := template.Parse(`{{- if .Tools }}[TOOLS]{{ range .Tools }}{{ .Function.Name }}:{{ json .Function.Parameters }};{{ end }}[/TOOLS]{{ end }}` +
		`{{- range .Messages }}[{{ .Role }}{{ if .ToolCallID }} {{ .ToolCallID }}{{ end }}]{{ .Content }}` +
		`{{- range .ToolCalls }}<call {{ .Function.Name }} {{ .Function.Arguments }}>{{ end }}{{ end }}[assistant]`)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := newParsedTemplate("tools", parsed)
	if !tmpl.rendersTools {
		t.Fatal("a template that reads .Tools: rendersTools is false")
	}
	tool := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "now",
		Parameters: json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`)}}
	msgs := []genq.Message{
		{Role: genq.RoleUser, Content: "Time?"},
		{Role: genq.RoleAssistant, ToolCalls: []genq.ToolCall{{ID: "call_1", Type: "function", Function: genq.ToolCallFunction{Name: "now", Arguments: `{"tz":"UTC"}`}}}},
		{Role: genq.RoleTool, ToolCallID: "call_1", Content: "12:00"},
	}
	got, err := tmpl.RenderChat("sys", msgs, []genq.Tool{tool})
	if err != nil {
		t.Fatal(err)
	}
	const want = `[TOOLS]now:{"type":"object","properties":{"tz":{"type":"string"}}};[/TOOLS]` +
		`[system]sys[user]Time?[assistant]<call now {"tz":"UTC"}>[tool call_1]12:00[assistant]`
	if got != want {
		t.Fatalf("rendered\n%s\nwant\n%s", got, want)
	}

	msgs[1].ToolCalls[0].Function.Arguments = `not json`
	if _, err := tmpl.RenderChat("sys", msgs, nil); genq.ErrorCode(err) != genq.Invalid {
		t.Fatalf("arguments that are not JSON: err = %v, want invalid", err)
	}
}

// TestJobPromptRendersOfferedTools: a job's prompt holds the tools its
// answer may call: all of them, or the one tool_choice names; with
// tool_choice "none", all of them still, as vLLM renders them.
func TestJobPromptRendersOfferedTools(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, ContextSize: 2048})
	tests := []struct {
		name       string
		choice     *genq.ToolChoice
		want, lose []string
	}{
		{"auto", nil, []string{"Given the following functions", `"name": "get_weather"`, `"name": "now"`}, nil},
		{"named", &genq.ToolChoice{Function: "now"}, []string{"Given the following functions", `"name": "now"`}, []string{`"name": "get_weather"`}},
		{"none", &genq.ToolChoice{Mode: genq.ToolChoiceNone}, []string{"Given the following functions", `"name": "get_weather"`, `"name": "now"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := chatJob("p", 1)
			job.Tools, job.ToolChoice = []genq.Tool{weatherTool, timeTool}, tt.choice
			ids, err := b.jobPrompt(job)
			if err != nil {
				t.Fatal(err)
			}
			text, err := b.testDecode(ids)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.want {
				if !strings.Contains(text, s) {
					t.Errorf("the prompt lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.lose {
				if strings.Contains(text, s) {
					t.Errorf("the prompt holds %q:\n%s", s, text)
				}
			}
		})
	}
}
