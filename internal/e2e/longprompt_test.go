package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
)

// agentRequest is a coding agent's request in the Messages API's shape:
// tools of kb KiB of JSON, a system prompt, and a conversation whose last
// turn holds text of about n bytes, with max_tokens 32,000, as Claude Code
// sends it.
func agentRequest(kb int, text string) (tools, messages string) {
	var ts []string
	desc := strings.Repeat("Reads a file from the local filesystem; the path must be absolute. ", 14)
	for i := 0; len(strings.Join(ts, ",")) < kb<<10; i++ {
		ts = append(ts, fmt.Sprintf(`{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"file_path":{"type":"string","description":"The absolute path"},"offset":{"type":"number"},"limit":{"type":"number"}},"required":["file_path"]}}`, i, desc))
	}
	body, _ := json.Marshal(text)
	return "[" + strings.Join(ts, ",") + "]",
		`[{"role":"user","content":"Fix the bug in main.go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Tool0","input":{"file_path":"/src/main.go"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(body) + `}]}]`
}

// source is n bytes of something like Go code, which a file an agent
// reads holds.
func source(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "func handler%d(w http.ResponseWriter, r *http.Request) {\n\tif err := serve(w, r, %d); err != nil {\n\t\tlog.Printf(\"handler %d: %%v\", err)\n\t}\n}\n\n", i, i, i)
	}
	return b.String()[:n]
}

// TestAgentSizedPrompts: a worker left to its default context serves what
// coding agents send: tens of thousands of tokens of tools and files, and a
// max_tokens of 32,000, which its cap (here 8) bounds on every route,
// saying so in the finish reason; count_tokens counts any conversation,
// and one past the context is refused in each API's words, with its
// tokens and the context's.
func TestAgentSizedPrompts(t *testing.T) {
	if testing.Short() {
		t.Skip("prefills tens of thousands of tokens")
	}
	// A long prompt's prefill takes a CPU thread many seconds.
	s := newStack(t, stackOptions{http: httpapi.Config{JobTimeout: 5 * time.Minute}})
	s.tinyTextWorkerWith(textgen.Config{Slots: 2, Threads: 1, MaxNewTokens: 8, IgnoreEOS: true})

	// 20,000 tokens with the tiny model's vocabulary, about a byte a token:
	// 76,000 (agentRequest(40, source(30<<10))) answer too, in 85 s on one
	// thread of a busy 2-core machine, too long for every run.
	tools, messages := agentRequest(12, source(8<<10))
	agent := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":32000,"system":"You are Claude Code.","tools":%s,"messages":%s}`, tools, messages)
	count := func(body string) int {
		t.Helper()
		r := s.postKey("/v1/messages/count_tokens", "", body)
		var c struct {
			InputTokens int `json:"input_tokens"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &c) != nil {
			t.Fatalf("count_tokens: %d %s", r.status, r.body)
		}
		return c.InputTokens
	}
	tokens := count(agent)
	t.Logf("the agent's request: %d bytes, %d tokens", len(agent), tokens)
	if tokens < 15000 {
		t.Fatalf("the agent's request counts %d tokens: not an agent's size", tokens)
	}

	start := time.Now()
	r := s.postKey("/v1/messages", "", agent)
	var msg struct {
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
			OutputTokens         int `json:"output_tokens"`
		} `json:"usage"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &msg) != nil {
		t.Fatalf("/v1/messages: %d %.500s", r.status, r.body)
	}
	if msg.StopReason != "max_tokens" || msg.Usage.OutputTokens != 8 || msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens != tokens {
		t.Fatalf("/v1/messages: %s; want stop_reason max_tokens at the cap's 8 tokens, after the %d counted", r.body, tokens)
	}
	t.Logf("%d tokens of prompt answered in %v", tokens, time.Since(start).Round(time.Millisecond))

	chat := fmt.Sprintf(`{"model":"gpt-5","max_tokens":32000,"messages":[{"role":"system","content":"You are Cline."},{"role":"user","content":%q}]}`, source(16<<10))
	c := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", "", chat))
	if len(c.Choices) != 1 || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 8 || c.Usage.PromptTokens < 10000 {
		t.Fatalf("/v1/chat/completions: %+v; want finish_reason length at the cap's 8 tokens", c)
	}

	// Past the context of 131,072 tokens (the tiny model's trained one):
	// counted, and refused in each API's words.
	huge := strings.Repeat("x y z ", 130_000)
	tools, messages = agentRequest(1, huge)
	over := fmt.Sprintf(`{"model":"m","max_tokens":32000,"tools":%s,"messages":%s}`, tools, messages)
	n := count(over)
	if n <= 131072 {
		t.Fatalf("the long conversation counts %d tokens, within the context", n)
	}
	r = s.postKey("/v1/messages", "", over)
	want := fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens \u003e 131072 maximum"}}`, n)
	if r.status != http.StatusBadRequest || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("/v1/messages past the context: %d %s; want 400 %s", r.status, r.body, want)
	}
	r = s.postKey("/v1/chat/completions", "", fmt.Sprintf(`{"max_tokens":32000,"messages":[{"role":"user","content":%q}]}`, huge))
	if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || e.Error.Code != "context_length_exceeded" || e.Error.Type != "invalid_request_error" ||
		e.Error.Param == nil || *e.Error.Param != "messages" || !strings.HasPrefix(e.Error.Message, "This model's maximum context length is 131072 tokens. However, your messages resulted in ") {
		t.Fatalf("/v1/chat/completions past the context: %d %s", r.status, r.body)
	}
}
