package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// Anthropic's routes answer as Anthropic's API does where its SDKs look:
// a request-id header beside x-request-id, 404 and 405 in its error shape;
// and every text route names the tools it left out.
func TestMessagesRoutesAsAnthropics(t *testing.T) {
	textJobs := fakeJobs{contentType: "application/json", attempt: 1,
		body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`}
	h, _ := testServer(t, genq.VariantB, textJobs)
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		want                     string
		requestID                bool   // a request-id header
		ignored                  string // the Genq-Tools-Ignored header
	}{
		{"a message with thinking and a server tool", "POST", "/v1/messages", `{"model":"m","max_tokens":64,"thinking":{"type":"adaptive"},
			"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, 200,
			`{"id":"msg_job-1","type":"message","role":"assistant"`, true, "web_search"},
		{"count_tokens with thinking", "POST", "/v1/messages/count_tokens", `{"model":"m","thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"x"}]}`, 200,
			`{"input_tokens":2}`, true, ""},
		{"a refusal", "POST", "/v1/messages", `{"model":"m","max_tokens":64,"messages":[{"role":"tool","content":"x"}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.role: Input should be 'user', 'assistant' or 'system'"}}`, true, ""},
		{"no such route", "POST", "/v1/messages/batches", `{}`, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"Not Found: no route /v1/messages/batches"}}`, true, ""},
		{"a wrong method", "GET", "/v1/messages", ``, 405,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Method Not Allowed: GET is not allowed on /v1/messages"}}`, true, ""},
		{"OpenAI's 404 elsewhere", "GET", "/v1/nothing", ``, 404, `{"error":{"message":"no route /v1/nothing"`, false, ""},
		{"a response with hosted tools", "POST", "/v1/responses", `{"input":"x","tools":[{"type":"web_search"},{"type":"code_interpreter"}]}`, 200,
			`"tool_choice":"auto","tools":[{"type":"web_search"},{"type":"code_interpreter"}]`, false, "web_search,code_interpreter"},
		{"a chat with web search", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"web_search_options":{}}`, 200,
			`"object":"chat.completion"`, false, "web_search"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("%d %s\nwant %d %s", rec.Code, rec.Body, tt.status, tt.want)
			}
			id, xid := rec.Header().Get("Request-Id"), rec.Header().Get("X-Request-Id")
			if tt.requestID && (id == "" || id != xid) || !tt.requestID && id != "" {
				t.Errorf("request-id %q, x-request-id %q", id, xid)
			}
			if got := rec.Header().Get(HeaderToolsIgnored); got != tt.ignored {
				t.Errorf("%s: %q, want %q", HeaderToolsIgnored, got, tt.ignored)
			}
			if tt.status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != "POST" {
				t.Errorf("Allow: %q", rec.Header().Get("Allow"))
			}
		})
	}
}
