package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestDecodeResponse(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		msgs       []genq.Message // the job's chat, when accepted
		msg        string         // the refusal, else ""
	}{
		{"a string", `{"model":"m","input":"hi"}`, []genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"instructions first", `{"input":"hi","instructions":"be"}`,
			[]genq.Message{{Role: "system", Content: "be"}, {Role: "user", Content: "hi"}}, ""},
		{"messages and parts, as the SDKs send them", `{"input":[{"role":"developer","content":"sys"},
			{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},
			{"role":"user","content":"c"}]}`,
			[]genq.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "c"}}, ""},
		{"an image part", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, nil,
			`input[0].content has a part of type "input_image": only text parts are supported`},
		{"store false", `{"input":"hi","store":false}`, []genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"no input", `{"model":"m"}`, nil, "input is required: a string, or a list of messages"},
		{"an empty list", `{"input":[]}`, nil, "input is required: a string, or a list of messages"},
		{"input a number", `{"input":3}`, nil, "input must be a string, or a list of messages ({role, content})"},
		{"function calls and their outputs", `{"input":[{"role":"user","content":"w?"},
			{"type":"function_call","call_id":"c1","name":"w","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"w","arguments":"{\"a\":1}"},
			{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"y"}]}]}`,
			[]genq.Message{{Role: "user", Content: "w?"},
				{Role: "assistant", ToolCalls: []genq.ToolCall{{ID: "c1", Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: "{}"}},
					{ID: "c2", Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: `{"a":1}`}}}},
				{Role: "tool", Content: "x", ToolCallID: "c1"}, {Role: "tool", Content: "y", ToolCallID: "c2"}}, ""},
		{"a reasoning item alone", `{"input":[{"type":"reasoning","summary":[]}]}`, nil,
			"messages is required: a list of {role, content}"},
		{"reasoning sent back", `{"input":[{"role":"user","content":"q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],
			"content":[{"type":"reasoning_text","text":"r"},{"type":"reasoning_text","text":"s"}]},{"type":"function_call","call_id":"c1","name":"w","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}]},
			{"role":"assistant","content":"a"}]}`, []genq.Message{{Role: "user", Content: "q"},
			{Role: "assistant", ReasoningContent: "r\ns", ToolCalls: []genq.ToolCall{{ID: "c1", Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: "{}"}}}},
			{Role: "tool", Content: "x", ToolCallID: "c1"}, {Role: "assistant", Content: "a", ReasoningContent: "t"}}, ""},
		{"another item", `{"input":[{"type":"web_search_call"}]}`, nil,
			`input[0] is of type "web_search_call": only messages, reasoning, function calls and their outputs are supported`},
		{"store true", `{"input":"hi","store":true}`, nil,
			"store: true is not supported: this server keeps no conversation state; send store: false (or leave it out) and the whole conversation in input"},
		{"previous_response_id", `{"input":"hi","previous_response_id":"resp_1"}`, nil,
			"previous_response_id is not supported: this server keeps no conversation state; send the whole conversation in input"},
		{"text.format", `{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{}}}}`, []genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"text.format text", `{"input":"hi","text":{"format":{"type":"text"}}}`, []genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"function tools", `{"input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"}}`,
			[]genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"a hosted tool", `{"input":"hi","tools":[{"type":"web_search"}]}`, []genq.Message{{Role: "user", Content: "hi"}}, ""},
		{"tool_choice of another shape", `{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, nil,
			`tool_choice {"type":"function"} needs the function's name`},
		{"max_output_tokens 0", `{"input":"hi","max_output_tokens":0}`, nil, "max_output_tokens must be at least 1, not 0"},
		{"too long", `{"input":"0123456789"}`, nil, "messages hold 10 bytes of content; the limit is 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var job genq.Job
			_, err := DecodeResponse([]byte(tt.body), 8, &job)
			if tt.msg != "" {
				if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
					t.Fatalf("got %v, want %q", err, tt.msg)
				}
				return
			}
			got, _ := json.Marshal(job.Messages)
			want, _ := json.Marshal(tt.msgs)
			if err != nil || string(got) != string(want) {
				t.Fatalf("got %s, %v; want %s", got, err, want)
			}
		})
	}
	var format genq.Job
	if _, err := DecodeResponse([]byte(`{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"integer"},"strict":true}}}`), 8, &format); err != nil ||
		format.ResponseFormat == nil || format.ResponseFormat.Type != "json_schema" || string(format.ResponseFormat.JSONSchema.Schema) != `{"type":"integer"}` {
		t.Fatalf("text.format becomes %+v, %v", format.ResponseFormat, err)
	}
	var job genq.Job
	p, err := DecodeResponse([]byte(`{"model":"m","input":"x","max_output_tokens":5,"temperature":0.5,"top_p":0.9,"stream":true}`), 8, &job)
	if err != nil || p.Model != "m" || !p.Stream || !job.Stream || job.MaxNewTokens() != 5 || *job.Temperature != 0.5 || *job.TopP != 0.9 {
		t.Fatalf("%+v %+v %v", p, job, err)
	}
}

func TestRenderResponse(t *testing.T) {
	rs := ResponseStream{JobID: "j", Created: 7, Model: "m"}
	done := genq.TextResult{GeneratedText: "hi", FinishReason: genq.FinishStop, Usage: &genq.Usage{PromptTokens: 3, CompletionTokens: 1}}
	got, _ := json.Marshal(rs.Done(done))
	want := `{"id":"resp_j","object":"response","created_at":7,"status":"completed","error":null,"incomplete_details":null,"model":"m",` +
		`"output":[{"type":"message","id":"msg_j","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}]}],` +
		`"parallel_tool_calls":true,"previous_response_id":null,"store":false,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],` +
		`"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	done.FinishReason = genq.FinishLength
	if r := rs.Done(done); r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("at the limit: %+v", r)
	}
	events := NewResponseEvents(rs, genq.Job{Envelope: genq.Envelope{ID: "j"}})
	var types []string
	for _, e := range append(events.Piece("h"), events.End(done)...) {
		types = append(types, e.Type())
	}
	wantTypes := `["response.created","response.in_progress","response.output_item.added","response.content_part.added",` +
		`"response.output_text.delta","response.output_text.done","response.content_part.done","response.output_item.done","response.incomplete"]`
	if got, _ := json.Marshal(types); string(got) != wantTypes {
		t.Errorf("events %s, want %s", got, wantTypes)
	}
}

// A response that calls tools has a function_call item per call, whole or
// streamed: the item added with its name, the arguments by deltas, then
// done; the streamed arguments join into the whole response's.
func TestResponseToolCalls(t *testing.T) {
	rs := ResponseStream{JobID: "j", Created: 7, Model: "m"}
	job := genq.Job{Envelope: genq.Envelope{ID: "j"}, TextRequest: genq.TextRequest{Tools: []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "w"}}}, ToolChoice: &genq.ToolChoice{Mode: "required"}}}
	text := `{"name": "w", "parameters": {"city": "Oslo"}}`
	done := genq.TextResult{GeneratedText: text, FinishReason: genq.FinishToolCalls, Usage: &genq.Usage{PromptTokens: 3, CompletionTokens: 9},
		ToolCalls: []genq.ToolCall{{ID: genq.ToolCallID("j", 0), Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: `{"city": "Oslo"}`}}}}
	whole, _ := json.Marshal(rs.Done(done).Output)
	wantOutput := `[{"type":"function_call","id":"fc_j_0","call_id":"call_j_0","name":"w","arguments":"{\"city\": \"Oslo\"}","status":"completed"}]`
	if string(whole) != wantOutput {
		t.Errorf("output %s, want %s", whole, wantOutput)
	}
	events := NewResponseEvents(rs, job)
	var all []ResponseEvent
	for i := 0; i < len(text); i += 5 {
		all = append(all, events.Piece(text[i:min(i+5, len(text))])...)
	}
	all = append(all, events.End(done)...)
	var types []string
	args := ""
	for _, e := range all {
		types = append(types, e.Type())
		if e.Type() == "response.function_call_arguments.delta" {
			args += e["delta"].(string)
		}
	}
	if args != `{"city": "Oslo"}` {
		t.Errorf("the deltas join into %q", args)
	}
	got, _ := json.Marshal(types)
	want := `["response.created","response.in_progress","response.output_item.added",` +
		strings.TrimSuffix(strings.Repeat(`"response.function_call_arguments.delta",`, strings.Count(string(got), "arguments.delta")), ",") +
		`,"response.function_call_arguments.done","response.output_item.done","response.completed"]`
	if string(got) != want {
		t.Errorf("events %s\nwant   %s", got, want)
	}
	last, _ := json.Marshal(all[len(all)-1]["response"].(Response).Output)
	if string(last) != wantOutput {
		t.Errorf("the stream's last response has %s, want %s", last, wantOutput)
	}
}

// Tools genq cannot run (hosted: web search, files, code, MCP; custom
// tools of free text) are left out of the job and named, a namespace's
// functions are the job's, and a choice that forces a left-out tool is
// refused, naming it.
func TestResponseToolsLeftOut(t *testing.T) {
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	for _, tt := range []struct {
		name, tools, choice string
		functions, ignored  string // the job's, comma-separated
		choiceOut           string // the job's tool_choice as JSON
		msg                 string // the refusal, else ""
	}{
		{"hosted tools beside a function", `[{"type":"web_search"},` + fn + `,{"type":"code_interpreter","container":{"type":"auto"}},{"type":"mcp","server_label":"x"}]`, "",
			"f", "web_search,code_interpreter,mcp", "null", ""},
		{"a custom tool by its name", `[{"type":"custom","name":"grep"},` + fn + `]`, `"auto"`, "f", "grep", `"auto"`, ""},
		{"a namespace flattened", `[{"type":"namespace","name":"crm","description":"CRM","tools":[` + fn + `,{"type":"function","name":"g"}]},{"type":"file_search"}]`,
			`{"type":"function","name":"g"}`, "f,g", "file_search", `{"type":"function","function":{"name":"g"}}`, ""},
		{"hosted tools alone, auto", `[{"type":"web_search"}]`, `"auto"`, "", "web_search", "null", ""},
		{"hosted tools alone, required", `[{"type":"web_search"}]`, `"required"`, "", "", "", `tool_choice "required" forces a tool, and this server can run none of these (web_search): only function tools are served`},
		{"a hosted tool forced", `[{"type":"web_search_preview"},` + fn + `]`, `{"type":"web_search_preview"}`, "", "", "",
			`tool_choice forces "web_search_preview", a tool this server cannot run (only function tools are served): let the model choose, or give it as a function`},
		{"a custom tool forced", `[{"type":"custom","name":"grep"},` + fn + `]`, `{"type":"custom","name":"grep"}`, "", "", "",
			`tool_choice forces "grep", a tool this server cannot run (only function tools are served): let the model choose, or give it as a function`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"input":"hi","parallel_tool_calls":false,"tools":` + tt.tools
			if tt.choice != "" {
				body += `,"tool_choice":` + tt.choice
			}
			var job genq.Job
			_, err := DecodeResponse([]byte(body+"}"), 1<<10, &job)
			if tt.msg != "" {
				if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
					t.Fatalf("got %v, want %q", err, tt.msg)
				}
				return
			}
			if err == nil {
				err = job.ValidateInput()
			}
			var names []string
			for _, f := range job.Tools {
				names = append(names, f.Function.Name)
			}
			choice, _ := json.Marshal(job.ToolChoice)
			if err != nil || strings.Join(names, ",") != tt.functions || strings.Join(job.IgnoredTools, ",") != tt.ignored || string(choice) != tt.choiceOut {
				t.Fatalf("functions %v, ignored %v, choice %s, %v", names, job.IgnoredTools, choice, err)
			}
		})
	}
}

// A response repeats its request's tools, tool_choice and
// parallel_tool_calls, as OpenAI's do, the tools left out by their type.
func TestResponseEchoesTools(t *testing.T) {
	var job genq.Job
	body := `{"input":"hi","tools":[{"type":"function","name":"f","description":"F.","parameters":{"type":"object"},"strict":true},{"type":"web_search"}],` +
		`"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`
	if _, err := DecodeResponse([]byte(body), 1<<10, &job); err != nil {
		t.Fatal(err)
	}
	rs := ResponseStream{JobID: "j", Echo: EchoOf(job)}
	r := rs.Done(genq.TextResult{GeneratedText: "hi"})
	got, _ := json.Marshal(map[string]any{"tools": r.Tools, "tool_choice": r.ToolChoice, "parallel_tool_calls": r.ParallelToolCalls})
	want := `{"parallel_tool_calls":false,"tool_choice":{"name":"f","type":"function"},` +
		`"tools":[{"type":"function","name":"f","description":"F.","parameters":{"type":"object"},"strict":true},{"type":"web_search"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	created := NewResponseEvents(rs, job).Piece("")[0]["response"].(Response)
	if c, _ := json.Marshal(created.ToolChoice); string(c) != `{"name":"f","type":"function"}` || len(created.Tools) != 2 {
		t.Errorf("response.created has %s, %v", c, created.Tools)
	}
}

// TestReasoningRendered: a result's reasoning is a chat's
// reasoning_content (whole and by delta, its tokens in the usage) and a
// response's reasoning item before its message (whole and by
// reasoning_text deltas).
func TestReasoningRendered(t *testing.T) {
	r := genq.TextResult{GeneratedText: "Blue.", Reasoning: "Light scatters.", FinishReason: genq.FinishStop,
		Usage: &genq.Usage{PromptTokens: 3, CompletionTokens: 9, ReasoningTokens: 4}}
	chat := RenderChat(TextResult{TextResult: r, JobID: "j"})
	if m := chat.Choices[0].Message; m.ReasoningContent == nil || *m.ReasoningContent != "Light scatters." || *m.Content != "Blue." ||
		chat.Usage.CompletionTokensDetails == nil || chat.Usage.CompletionTokensDetails.ReasoningTokens != 4 {
		b, _ := json.Marshal(chat)
		t.Fatalf("chat %s", b)
	}
	chunks := NewChatChunks(Stream{JobID: "j"}, []genq.Job{{}})
	c := chunks.Piece(0, "", genq.TextPiece{Reasoning: "Light"}, true).(ChatCompletionChunk)
	if d := c.Choices[0].Delta; d.ReasoningContent != "Light" || d.Content != "" || d.Role != genq.RoleAssistant {
		t.Fatalf("delta %+v", d)
	}

	rs := ResponseStream{JobID: "j", Created: 7, Model: "m"}
	resp := rs.Done(r)
	if len(resp.Output) != 2 || resp.Output[0].(ResponseReasoning).Content[0].Text != "Light scatters." || resp.Usage.OutputTokensDetails.ReasoningTokens != 4 {
		b, _ := json.Marshal(resp)
		t.Fatalf("response %s", b)
	}
	events := NewResponseEvents(rs, genq.Job{Envelope: genq.Envelope{ID: "j"}})
	var types []string
	var reasoning string
	for _, e := range append(append(events.Reasoning("Light "), events.Reasoning("scatters.")...), append(events.Piece("Blue."), events.End(r)...)...) {
		types = append(types, e.Type())
		if e.Type() == "response.reasoning_text.delta" {
			reasoning += e["delta"].(string)
		}
		if e.Type() == "response.completed" && len(e["response"].(Response).Output) != 2 {
			t.Errorf("completed with %d items", len(e["response"].(Response).Output))
		}
	}
	want := `["response.created","response.in_progress","response.output_item.added","response.content_part.added",` +
		`"response.reasoning_text.delta","response.reasoning_text.delta","response.reasoning_text.done","response.content_part.done","response.output_item.done",` +
		`"response.output_item.added","response.content_part.added","response.output_text.delta",` +
		`"response.output_text.done","response.content_part.done","response.output_item.done","response.completed"]`
	if got, _ := json.Marshal(types); string(got) != want || reasoning != "Light scatters." {
		t.Errorf("events %s, want %s; reasoning %q", got, want, reasoning)
	}
}
