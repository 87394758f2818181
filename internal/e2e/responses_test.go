package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type responseObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Model  string `json:"model"`
	Output []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// TestResponses: POST /v1/responses answers a conversation as the same chat
// on /v1/chat/completions does, whole and streamed as typed events, and
// refuses what a stateless server cannot do in OpenAI's error shape.
func TestResponses(t *testing.T) {
	s := newStack(t, stackOptions{})
	model := s.tinyTextWorker(16)
	chat := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", "",
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0}`))
	want := chat.Choices[0].Message.Content
	const body = `{"model":"x","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"max_output_tokens":6,"temperature":0%s}`

	r := s.postKey("/v1/responses", "", strings.Replace(body, "%s", "", 1))
	got := decodeAs[responseObject](t, r)
	if r.status != http.StatusOK || !strings.HasPrefix(got.ID, "resp_") || got.Object != "response" || got.Model != model ||
		got.Status != "incomplete" || got.IncompleteDetails == nil || got.IncompleteDetails.Reason != "max_output_tokens" ||
		len(got.Output) != 1 || got.Output[0].Role != "assistant" || len(got.Output[0].Content) != 1 ||
		got.Output[0].Content[0].Type != "output_text" || got.Output[0].Content[0].Text != want ||
		got.Usage.OutputTokens != 6 || got.Usage.InputTokens != chat.Usage.PromptTokens || got.Usage.TotalTokens != got.Usage.InputTokens+6 {
		t.Fatalf("%d %s; the chat answered %q", r.status, r.body, want)
	}

	resp, events := s.stream(t.Context(), "/v1/responses", strings.Replace(body, "%s", `,"stream":true`, 1), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	var types []string
	var deltas string
	var last responseObject
	for i, e := range events {
		var ev struct {
			Type     string          `json:"type"`
			Seq      int             `json:"sequence_number"`
			Delta    string          `json:"delta"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil || ev.Seq != i {
			t.Fatalf("event %d %q: %v", i, e.data, err)
		}
		types = append(types, ev.Type)
		deltas += ev.Delta
		if ev.Type == "response.incomplete" {
			_ = json.Unmarshal(ev.Response, &last)
		}
	}
	if len(types) < 9 || types[0] != "response.created" || types[4] != "response.output_text.delta" || types[len(types)-1] != "response.incomplete" ||
		deltas != want || last.Output[0].Content[0].Text != want || last.Usage.OutputTokens != 6 {
		t.Fatalf("events %v, text %q; want %q", types, deltas, want)
	}

	for _, tt := range []struct{ name, body, want string }{
		{"store", `{"input":"hi","store":true}`, "this server keeps no conversation state"},
		{"previous_response_id", `{"input":"hi","previous_response_id":"resp_x"}`, "this server keeps no conversation state"},
		{"structured output", `{"input":"hi","text":{"format":{"type":"json_schema"}}}`, "schema is required"},
		{"a bad schema", `{"input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object","properties":{"a":{"not":{"uniqueItems":true}}}}}}}`, `not over "uniqueItems"`},
		{"a hosted tool forced", `{"input":"hi","tools":[{"type":"file_search"}],"tool_choice":"required"}`, "this server can run none of these (file_search)"},
		{"a strict tool's schema genq cannot enforce", `{"input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}]}`, `the schema keyword "uniqueItems"`},
		{"no input", `{}`, "input is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey("/v1/responses", "", tt.body)
			if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.want) {
				t.Fatalf("%d %s; want 400 with %q", r.status, r.body, tt.want)
			}
		})
	}
}
