package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
)

// TestClaudeCodeRequests: what Claude Code sends on every request
// (adaptive thinking, system blocks, a system message mid-conversation, an
// earlier answer's thinking block, server tools beside its own) is
// answered, streamed with the prompt's tokens in message_start, the server
// tools named in Genq-Tools-Ignored; count_tokens takes the same request;
// and the Messages API's headers and errors are Anthropic's.
func TestClaudeCodeRequests(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorker(16)
	const conversation = `"model":"claude-sonnet-4-5","thinking":{"type":"adaptive"},"output_config":{"effort":"high"},
		"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5},
			{"name":"Read","description":"Reads a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],
		"tool_choice":{"type":"none"},
		"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"The user greets me.","signature":"sig"},{"type":"text","text":"Hello."}]},
			{"role":"user","content":[{"type":"text","text":"list the files"}]},
			{"role":"system","content":"The user's working directory is /tmp."}]`

	resp, events := s.stream(t.Context(), "/v1/messages", `{"max_tokens":32000,"stream":true,`+conversation+`}`, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(httpapi.HeaderToolsIgnored) != "web_search" ||
		resp.Header.Get("Request-Id") == "" || resp.Header.Get("Request-Id") != resp.Header.Get("X-Request-Id") {
		t.Fatalf("stream: %d, headers %v", resp.StatusCode, resp.Header)
	}
	var start, last struct {
		Type    string `json:"type"`
		Message struct {
			Usage struct {
				InputTokens          int `json:"input_tokens"`
				CacheReadInputTokens int `json:"cache_read_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Usage struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if len(events) < 2 || json.Unmarshal([]byte(events[0].data), &start) != nil || json.Unmarshal([]byte(events[len(events)-2].data), &last) != nil {
		t.Fatalf("events %v", events)
	}
	if start.Type != "message_start" || last.Type != "message_delta" || start.Message.Usage.InputTokens == 0 ||
		start.Message.Usage.InputTokens+start.Message.Usage.CacheReadInputTokens != last.Usage.InputTokens+last.Usage.CacheReadInputTokens {
		t.Fatalf("message_start %s, message_delta %s: want the prompt's tokens in both", events[0].data, events[len(events)-2].data)
	}

	r := s.postKey("/v1/messages/count_tokens", "", `{`+conversation+`}`)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(r.body, &count); err != nil || r.status != http.StatusOK ||
		count.InputTokens != last.Usage.InputTokens+last.Usage.CacheReadInputTokens {
		t.Fatalf("count_tokens: %d %s; the stream's prompt was %d tokens", r.status, r.body, last.Usage.InputTokens+last.Usage.CacheReadInputTokens)
	}

	for _, tt := range []struct{ name, path, body, want string }{
		{"a server tool forced", "/v1/messages", `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],
			"tool_choice":{"type":"tool","name":"web_search"},"messages":[{"role":"user","content":"hi"}]}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"tool_choice.name: \"web_search\" is a server tool`},
		{"a budget too small", "/v1/messages", `{"max_tokens":5,"thinking":{"type":"enabled","budget_tokens":5},"messages":[{"role":"user","content":"hi"}]}`,
			`"message":"thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"`},
		{"no such route", "/v1/messages/batches", `{}`, `{"type":"error","error":{"type":"not_found_error"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey(tt.path, "", tt.body)
			if r.status/100 != 4 || !strings.Contains(string(r.body), tt.want) || r.header.Get("Request-Id") == "" {
				t.Fatalf("%d %s; want %s", r.status, r.body, tt.want)
			}
		})
	}
}

// TestMessagesOutputFormat: output_config.format holds the answer to its
// schema, as LangChain's withStructuredOutput and the AI SDK's
// generateObject ask it, whatever the model samples: decoding is
// constrained from the first byte, the schema's objects closed (Anthropic's
// are strict), and the answer's bytes are bounded (whitespace between
// tokens at most a newline and 16 spaces, one digit), far under 512 tokens.
func TestMessagesOutputFormat(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorkerWith(textgen.Config{Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 2048, Seed: 1})
	const format = `{"type":"json_schema","schema":{"type":"object","properties":{"digit":{"type":"integer","minimum":0,"maximum":9}},"required":["digit"]}}`
	for _, field := range []string{`"output_config":{"format":` + format + `}`, `"output_format":` + format} {
		r := s.postKey("/v1/messages", "", `{"max_tokens":512,"temperature":1,"messages":[{"role":"user","content":"Pick a digit."}],`+field+`}`)
		m := decodeAs[anthropicMessage](t, r)
		if r.status != http.StatusOK || m.StopReason != "end_turn" || len(m.Content) != 1 {
			t.Fatalf("%s: %d %s", field[:16], r.status, r.body)
		}
		var answer map[string]json.RawMessage
		var digit int
		if err := json.Unmarshal([]byte(m.Content[0].Text), &answer); err != nil || len(answer) != 1 ||
			json.Unmarshal(answer["digit"], &digit) != nil || digit < 0 || digit > 9 {
			t.Fatalf("%s: the answer %q does not match the schema (%v)", field[:16], m.Content[0].Text, err)
		}
	}
}

// TestResponsesHostedTools: a response whose request offers hosted tools
// beside a function is answered, the hosted tools named in
// Genq-Tools-Ignored, and repeats the request's tools, tool_choice and
// parallel_tool_calls.
func TestResponsesHostedTools(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorker(16)
	r := s.postKey("/v1/responses", "", `{"input":"hi","max_output_tokens":4,"tools":[{"type":"web_search"},{"type":"code_interpreter","container":{"type":"auto"}},
		{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"none","parallel_tool_calls":false}`)
	var got struct {
		Status            string            `json:"status"`
		Tools             []json.RawMessage `json:"tools"`
		ToolChoice        string            `json:"tool_choice"`
		ParallelToolCalls bool              `json:"parallel_tool_calls"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK || r.header.Get(httpapi.HeaderToolsIgnored) != "web_search,code_interpreter" ||
		len(got.Tools) != 3 || got.ToolChoice != "none" || got.ParallelToolCalls {
		t.Fatalf("%d %s, %s %q", r.status, r.body, httpapi.HeaderToolsIgnored, r.header.Get(httpapi.HeaderToolsIgnored))
	}
}

// TestFunctionsWithoutParameters: a function that leaves parameters out
// (Qwen Code's get_goal and list_agents), or writes null, takes an empty
// parameter list, as OpenAI defines it: a call forced on a random model
// is {} at once, on chat completions and the Responses API, instead of an
// object of any members that ran until the job's deadline.
func TestFunctionsWithoutParameters(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorker(128)
	for _, tt := range []struct{ name, path, body string }{
		{"chat, absent", "/v1/chat/completions", `{"max_tokens":128,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"function","function":{"name":"get_goal","description":"Reads the goal."}},{"type":"function","function":{"name":"list_agents","parameters":null}}],
			"tool_choice":{"type":"function","function":{"name":"get_goal"}}}`},
		{"chat, null", "/v1/chat/completions", `{"max_tokens":128,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"function","function":{"name":"list_agents","parameters":null}}],"tool_choice":"required","parallel_tool_calls":false}`},
		{"responses, absent", "/v1/responses", `{"max_output_tokens":128,"input":"hi","tools":[{"type":"function","name":"get_goal"}],"tool_choice":"required","parallel_tool_calls":false}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey(tt.path, "", tt.body)
			var got struct {
				Choices []struct {
					Message struct {
						ToolCalls []genq.ToolCall `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				Output []struct {
					Type      string `json:"type"`
					Arguments string `json:"arguments"`
				} `json:"output"`
			}
			if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var args []string
			for _, c := range got.Choices {
				if c.FinishReason != "tool_calls" {
					t.Errorf("finish_reason %q, want tool_calls", c.FinishReason)
				}
				for _, call := range c.Message.ToolCalls {
					args = append(args, call.Function.Arguments)
				}
			}
			for _, o := range got.Output {
				if o.Type == "function_call" {
					args = append(args, o.Arguments)
				}
			}
			if len(args) == 0 {
				t.Fatalf("no call: %s", r.body)
			}
			for _, a := range args {
				var m map[string]any
				if err := json.Unmarshal([]byte(a), &m); err != nil || len(m) != 0 {
					t.Errorf("arguments %q, want {}", a)
				}
			}
		})
	}
}
