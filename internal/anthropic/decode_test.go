package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// What Claude Code and the SDKs send besides a plain chat: thinking (on
// every request, count_tokens too), thinking blocks sent back, system
// messages in messages, structured output, server tools. Each is taken
// into the job or refused in the API's words.
func TestDecodeWhatClientsSend(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	for _, tt := range []struct {
		name, body string
		count      bool // decode as count_tokens
		check      func(t *testing.T, job genq.Job)
		msg        string // the refusal, else ""
	}{
		{name: "adaptive thinking", body: `"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"messages":[` + user + `]`,
			check: wantThinking(&genq.Thinking{Enabled: true})},
		{name: "adaptive thinking counted", count: true, body: `"thinking":{"type":"adaptive"},"messages":[` + user + `]`,
			check: wantThinking(&genq.Thinking{Enabled: true})},
		{name: "thinking with a budget", body: `"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + user + `]`,
			check: wantThinking(&genq.Thinking{Enabled: true, BudgetTokens: 2048})},
		{name: "thinking disabled", body: `"thinking":{"type":"disabled"},"messages":[` + user + `]`, check: wantThinking(&genq.Thinking{})},
		{name: "no thinking", body: `"messages":[` + user + `]`, check: wantThinking(nil)},
		{name: "thinking without its budget", body: `"thinking":{"type":"enabled"},"messages":[` + user + `]`,
			msg: "thinking.enabled.budget_tokens: Field required"},
		{name: "a budget too small", body: `"thinking":{"type":"enabled","budget_tokens":100},"messages":[` + user + `]`,
			msg: "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{name: "a budget past max_tokens", body: `"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[` + user + `]`,
			msg: "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{name: "a thinking of another type", body: `"thinking":{"type":"deep"},"messages":[` + user + `]`,
			msg: "thinking: Input tag 'deep' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"},
		{name: "thinking blocks sent back are dropped", body: `"messages":[` + user + `,{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},
			{"type":"redacted_thinking","data":"x"},{"type":"text","text":"hello"}]},` + user + `]`,
			check: wantChat("user:hi|assistant:hello|user:hi")},
		{name: "a thinking block from the user", body: `"messages":[{"role":"user","content":[{"type":"thinking","thinking":"hmm"}]}]`,
			msg: "messages.0.content.0.type: a thinking block belongs in a message of the other role"},
		{name: "leading system messages join the system prompt", body: `"system":[{"type":"text","text":"top"}],"messages":[{"role":"system","content":"lead"},` + user + `]`,
			check: wantChat("system:top\n\nlead|user:hi")},
		{name: "a system message mid-conversation stays there", body: `"system":"top","messages":[` + user + `,{"role":"assistant","content":"a"},` + user +
			`,{"role":"system","content":[{"type":"text","text":"mid"}]}]`,
			check: wantChat("system:top|user:hi|assistant:a|user:hi|system:mid")},
		{name: "a system message of an image", body: `"messages":[` + user + `,{"role":"system","content":[{"type":"image"}]}]`,
			msg: `messages.1.content.0.type: a system prompt takes text blocks, not "image"`},
		{name: "another role", body: `"messages":[{"role":"tool","content":"x"}]`, msg: "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{name: "output_config.format", body: `"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},"messages":[` + user + `]`,
			check: wantSchema(`{"type":"object","properties":{"a":{"type":"integer"}}}`)},
		{name: "output_format, the beta's", body: `"output_format":{"type":"json_schema","schema":{"type":"integer"}},"messages":[` + user + `]`,
			check: wantSchema(`{"type":"integer"}`)},
		{name: "both formats", body: `"output_format":{"type":"json_schema","schema":{}},"output_config":{"format":{"type":"json_schema","schema":{}}},"messages":[` + user + `]`,
			msg: "output_format: is the deprecated name of output_config.format: give one of them"},
		{name: "a format of another type", body: `"output_config":{"format":{"type":"json_object"}},"messages":[` + user + `]`,
			msg: "output_config.format: Input tag 'json_object' found using 'type' does not match any of the expected tags: 'json_schema'"},
		{name: "a format without its schema", body: `"output_config":{"format":{"type":"json_schema"}},"messages":[` + user + `]`,
			msg: "output_config.format.schema: Field required"},
		{name: "a format beside tools it could call", body: `"output_config":{"format":{"type":"json_schema","schema":{}}},"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[` + user + `]`,
			msg: `output_config.format: this server cannot hold one answer to both a JSON schema and tools: drop the tools or send tool_choice {"type": "none"}`},
		{name: "server tools left out", body: `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3},{"name":"f","input_schema":{"type":"object"},"strict":true},
			{"type":"bash_20250124","name":"bash"},{"type":"custom","name":"g","input_schema":{"type":"object"}}],"messages":[` + user + `]`,
			check: wantTools("f,g", "web_search,bash", "")},
		{name: "server tools alone, auto", body: `"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"auto"},"messages":[` + user + `]`,
			check: wantTools("", "web_search", "null")},
		{name: "a server tool forced", body: `"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"web_search"},"messages":[` + user + `]`,
			msg: `tool_choice.name: "web_search" is a server tool or an Anthropic-defined client tool, which this server cannot offer; give a custom tool (name, description, input_schema)`},
		{name: "server tools alone, any", body: `"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"tool_choice":{"type":"any"},"messages":[` + user + `]`,
			msg: `tool_choice: "any" forces a tool, and this server can offer none of these (code_execution): give custom tools (name, description, input_schema)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m",` + tt.body + `}`
			if !tt.count && !strings.Contains(tt.body, `"max_tokens"`) {
				body = `{"model":"m","max_tokens":8192,` + tt.body + `}`
			}
			decode := Decode
			if tt.count {
				decode = DecodeCount
			}
			var job genq.Job
			_, err := decode([]byte(body), 1<<10, &job)
			if tt.msg != "" {
				if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
					t.Fatalf("got %v\nwant %q", err, tt.msg)
				}
				return
			}
			if err == nil {
				err = job.ValidateInput()
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, job)
		})
	}
}

func wantThinking(want *genq.Thinking) func(*testing.T, genq.Job) {
	return func(t *testing.T, job genq.Job) {
		got, _ := json.Marshal(job.Thinking)
		w, _ := json.Marshal(want)
		if string(got) != string(w) {
			t.Errorf("thinking %s, want %s", got, w)
		}
	}
}

func wantChat(want string) func(*testing.T, genq.Job) {
	return func(t *testing.T, job genq.Job) {
		var turns []string
		for _, m := range job.Messages {
			turns = append(turns, m.Role+":"+m.Content)
		}
		if got := strings.Join(turns, "|"); got != want {
			t.Errorf("chat %q, want %q", got, want)
		}
	}
}

func wantSchema(schema string) func(*testing.T, genq.Job) {
	return func(t *testing.T, job genq.Job) {
		f := job.ResponseFormat
		if f == nil || f.Type != genq.FormatJSONSchema || string(f.JSONSchema.Schema) != schema || f.JSONSchema.Strict == nil || !*f.JSONSchema.Strict {
			b, _ := json.Marshal(f)
			t.Errorf("response format %s, want the strict schema %s", b, schema)
		}
	}
}

func wantTools(functions, ignored, choice string) func(*testing.T, genq.Job) {
	return func(t *testing.T, job genq.Job) {
		var names []string
		for _, f := range job.Tools {
			names = append(names, f.Function.Name)
		}
		c, _ := json.Marshal(job.ToolChoice)
		if strings.Join(names, ",") != functions || strings.Join(job.IgnoredTools, ",") != ignored || choice != "" && string(c) != choice {
			t.Errorf("functions %v, ignored %v, choice %s; want %s, %s, %s", names, job.IgnoredTools, c, functions, ignored, choice)
		}
	}
}

// message_start carries the prompt's token counts when the first piece
// named them, as the API's does: input_tokens those computed,
// cache_read_input_tokens those the prefix cache held.
func TestMessageStartUsage(t *testing.T) {
	e := NewEvents(Answer{JobID: "j", Model: "m"}, genq.Job{})
	e.Prompt(120, 64)
	start := e.Piece("Hi")[0]
	msg, ok := start["message"].(Message)
	if start.Type() != "message_start" || !ok || msg.Usage.InputTokens != 56 || msg.Usage.CacheReadInputTokens != 64 || msg.Usage.OutputTokens != 0 {
		t.Fatalf("%+v", start)
	}
	b, _ := json.Marshal(msg.Usage)
	if string(b) != `{"input_tokens":56,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":64}` {
		t.Errorf("usage %s", b)
	}
}
