package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
)

type anthropicMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

type anthropicErr struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestMessages: POST /v1/messages answers a conversation as the same chat
// on /v1/chat/completions does, whole and streamed as Anthropic's events;
// count_tokens counts its prompt as the chat's usage does; and what genq
// cannot do is a 400 in Anthropic's error shape that reaches no worker.
func TestMessages(t *testing.T) {
	s := newStack(t, stackOptions{})
	model := s.tinyTextWorker(16)
	chat := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", "",
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0}`))
	want := chat.Choices[0].Message.Content
	const body = `{"model":"claude-x","system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":6,"temperature":0%s}`

	r := s.postKey("/v1/messages", "", strings.Replace(body, "%s", "", 1))
	got := decodeAs[anthropicMessage](t, r)
	if r.status != http.StatusOK || !strings.HasPrefix(got.ID, "msg_") || got.Type != "message" || got.Role != "assistant" || got.Model != model ||
		len(got.Content) != 1 || got.Content[0].Type != "text" || got.Content[0].Text != want || got.StopReason != "max_tokens" ||
		got.Usage.OutputTokens != 6 || got.Usage.InputTokens+got.Usage.CacheReadInputTokens != chat.Usage.PromptTokens {
		t.Fatalf("%d %s; the chat answered %q in %d prompt tokens", r.status, r.body, want, chat.Usage.PromptTokens)
	}

	resp, events := s.stream(t.Context(), "/v1/messages", strings.Replace(body, "%s", `,"stream":true`, 1), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	var types []string
	var text string
	var delta struct {
		Delta struct {
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	for _, e := range events {
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			t.Fatalf("event %q: %v", e.data, err)
		}
		types = append(types, ev.Type)
		if ev.Delta.Type == "text_delta" {
			text += ev.Delta.Text
		}
		if ev.Type == "message_delta" {
			_ = json.Unmarshal([]byte(e.data), &delta)
		}
	}
	n := len(types)
	if n < 7 || types[0] != "message_start" || types[1] != "ping" || types[2] != "content_block_start" || types[3] != "content_block_delta" ||
		types[n-3] != "content_block_stop" || types[n-2] != "message_delta" || types[n-1] != "message_stop" ||
		text != want || delta.Delta.StopReason != "max_tokens" || delta.Usage.OutputTokens != 6 {
		t.Fatalf("events %v, text %q, delta %+v; want %q", types, text, delta, want)
	}

	r = s.postKey("/v1/messages/count_tokens", "", `{"model":"x","system":"be brief","messages":[{"role":"user","content":"hi"}]}`)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(r.body, &count); err != nil || r.status != http.StatusOK || count.InputTokens != chat.Usage.PromptTokens {
		t.Fatalf("count_tokens: %d %s; the chat's prompt is %d tokens", r.status, r.body, chat.Usage.PromptTokens)
	}

	// max_tokens is a bound: Claude Code sends 32,000 whatever the model,
	// and the answer stops at the worker's cap (16 here).
	r = s.postKey("/v1/messages", "", `{"max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`)
	if m := decodeAs[anthropicMessage](t, r); r.status != http.StatusOK || m.StopReason != "max_tokens" || m.Usage.OutputTokens != 16 {
		t.Fatalf("max_tokens over the cap: %d %s", r.status, r.body)
	}

	before := s.jobsPublished()
	for _, tt := range []struct{ name, body, want string }{
		{"no max_tokens", `{"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{"an image", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`, "messages.0.content.0.type: images are not supported"},
		{"a document", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, "documents are not supported"},
		{"a thinking budget not below max_tokens", `{"max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"a server tool forced", `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"},"messages":[{"role":"user","content":"hi"}]}`, "is a server tool"},
		{"a tool without a schema", `{"max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, "tools.0.input_schema: Field required"},
		{"a schema that is not JSON Schema", `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}}],"messages":[{"role":"user","content":"hi"}]}`,
			`tools.1.input_schema: at #/properties/a: $ref "#/nowhere" points to nothing`},
		{"tool_choice without tools", `{"max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`, "tools is empty"},
		{"a role of OpenAI's", `{"max_tokens":5,"messages":[{"role":"tool","content":"hi"}]}`, `Input should be 'user', 'assistant' or 'system'`},
		{"temperature over 1", `{"max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, "temperature: must be between 0 and 1"},
		{"no messages", `{"max_tokens":5}`, "messages: Field required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey("/v1/messages", "", tt.body)
			e := decodeAs[anthropicErr](t, r)
			if r.status != http.StatusBadRequest || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.want) {
				t.Fatalf("%d %s; want 400 with %q", r.status, r.body, tt.want)
			}
		})
	}
	if got := s.jobsPublished(); got != before {
		t.Fatalf("%d refused requests were queued", got-before)
	}
}

// TestMessagesTools: a tool_use → tool_result round trip with tool_choice
// any and disable_parallel_tool_use: the answer is exactly one tool_use
// block whose input matches the tool's schema, and the conversation that
// returns its result is answered in text.
//
// The verdict holds on any CPU by construction, not by what the random
// model happens to sample: with calls required and parallel calls off, the
// grammar binds from the first byte and admits exactly one call, whose
// bytes are bounded (whitespace between two JSON tokens is at most a
// newline and 16 spaces, the city at most 12 characters of at most 12
// bytes each as an escaped pair, days one digit), well under 400 bytes and
// so under 400 tokens. A budget of 512 tokens always holds it, so the
// answer can never be cut at max_tokens into text. (With parallel calls
// the grammar allows any number of them, and a random model at
// temperature 1 may run on into max_tokens.) The worker's seed makes a run
// repeatable on one machine (the Messages API has no seed of its own); it
// does not make the verdict.
func TestMessagesTools(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorkerWith(textgen.Config{Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 2048, Seed: 1})
	const tools = `"tools":[{"name":"get_weather","description":"the weather","input_schema":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},
		"required":["city","days"],"additionalProperties":false}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"temperature":1`
	r := s.postKey("/v1/messages", "", `{"max_tokens":512,"messages":[{"role":"user","content":"Weather in Oslo?"}],`+tools+`}`)
	got := decodeAs[anthropicMessage](t, r)
	if r.status != http.StatusOK || got.StopReason != "tool_use" || len(got.Content) != 1 {
		t.Fatalf("%d %s: want one tool_use block", r.status, r.body)
	}
	var uses []string
	for _, c := range got.Content {
		var in struct {
			City *string `json:"city"`
			Days *whole  `json:"days"`
		}
		if err := json.Unmarshal(c.Input, &in); err != nil || c.Type != "tool_use" || c.Name != "get_weather" || c.ID == "" ||
			in.City == nil || len([]rune(*in.City)) > 12 || in.Days == nil || *in.Days < 1 || *in.Days > 7 {
			t.Fatalf("block %+v (%s) does not match the tool's schema (%v)", c, c.Input, err)
		}
		block, _ := json.Marshal(map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
		uses = append(uses, string(block))
	}
	var results []string
	for _, c := range got.Content {
		results = append(results, `{"type":"tool_result","tool_use_id":"`+c.ID+`","content":[{"type":"text","text":"sunny, 21 C"}]}`)
	}
	followUp := `{"max_tokens":8,"messages":[{"role":"user","content":"Weather in Oslo?"},{"role":"assistant","content":[` +
		strings.Join(uses, ",") + `]},{"role":"user","content":[` + strings.Join(results, ",") + `]}],` +
		strings.Replace(tools, `{"type":"any","disable_parallel_tool_use":true}`, `{"type":"none"}`, 1) + `}`
	r = s.postKey("/v1/messages", "", followUp)
	got = decodeAs[anthropicMessage](t, r)
	if r.status != http.StatusOK || len(got.Content) != 1 || got.Content[0].Type != "text" || got.StopReason == "tool_use" {
		t.Fatalf("the results' turn: %d %s", r.status, r.body)
	}
}

// TestMessagesKeys: the Messages API takes its key in x-api-key, as
// Anthropic's SDKs send it, and refuses without one in its error shape.
func TestMessagesKeys(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{APIKeys: []string{"k-one"}}})
	post := func(header, value string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, s.api.URL+"/v1/messages/count_tokens", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	for _, tt := range []struct{ header, value string }{{"", ""}, {"X-Api-Key", "wrong"}, {"Authorization", "Bearer wrong"}} {
		status, body := post(tt.header, tt.value)
		var e anthropicErr
		if err := json.Unmarshal(body, &e); err != nil || status != http.StatusUnauthorized || e.Type != "error" || e.Error.Type != "authentication_error" {
			t.Errorf("%s %q: %d %s; want 401 in Anthropic's shape", tt.header, tt.value, status, body)
		}
	}
	// With the key the request passes the guard (and, no worker being
	// live, is refused for that instead).
	for _, tt := range []struct{ header, value string }{{"X-Api-Key", "k-one"}, {"Authorization", "Bearer k-one"}} {
		if status, body := post(tt.header, tt.value); status == http.StatusUnauthorized {
			t.Errorf("%s: %d %s", tt.header, status, body)
		}
	}
}
