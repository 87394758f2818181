package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/httpapi"
)

type jobStatus struct {
	ID     string          `json:"id"`
	Object string          `json:"object"`
	Type   string          `json:"type"`
	Status string          `json:"status"`
	Result *chatCompletion `json:"result"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func (s *stack) call(method, path string) response {
	s.t.Helper()
	r, err := s.do(s.t.Context(), method, path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// waitJob polls a job until it is done: neither queued nor running.
func (s *stack) waitJob(id string) jobStatus {
	s.t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		st := decodeAs[jobStatus](s.t, s.call(http.MethodGet, "/v1/jobs/"+id))
		if st.Status != "queued" && st.Status != "running" {
			return st
		}
	}
	s.t.Fatalf("job %s not done", id)
	return jobStatus{}
}

func TestAsyncJobs(t *testing.T) {
	type delivery struct {
		sig  string
		body []byte
	}
	hooks := make(chan delivery, 4)
	fails := 1 // the first delivery fails: the second must come
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		hooks <- delivery{r.Header.Get(httpapi.HeaderSignature), body}
	}))
	defer receiver.Close()
	hookURL, _ := url.Parse(receiver.URL)

	const secret = "whsec-test"
	s := newStack(t, stackOptions{http: httpapi.Config{Async: httpapi.AsyncConfig{
		PollEvery: 50 * time.Millisecond, WebhookSecret: secret, WebhookBackoff: 50 * time.Millisecond,
		// Loopback is refused by default: the test's receiver is allowed by
		// name and with private addresses on.
		WebhookAllow: []string{hookURL.Hostname()}, WebhookAllowPrivate: true,
	}}})

	// Before any worker: a queued job can be cancelled, and stays so.
	r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"never","max_tokens":2}}`)
	queued := decodeAs[jobStatus](t, r)
	if r.status != http.StatusAccepted || queued.Status != "queued" || queued.ID == "" || r.header.Get("Location") != "/v1/jobs/"+queued.ID {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if st := decodeAs[jobStatus](t, s.call(http.MethodDelete, "/v1/jobs/"+queued.ID)); st.Status != "cancelled" {
		t.Fatalf("after DELETE: %+v", st)
	}
	s.tinyTextWorker(4)

	ids := make([]string, 50)
	for i := range ids {
		typ, req := "completion", fmt.Sprintf(`{"prompt":"job %d","max_tokens":2}`, i)
		if i%2 == 0 {
			typ, req = "chat.completion", fmt.Sprintf(`{"messages":[{"role":"user","content":"job %d"}],"max_tokens":2}`, i)
		}
		r := s.postKey("/v1/jobs", "", fmt.Sprintf(`{"type":%q,"request":%s}`, typ, req))
		if r.status != http.StatusAccepted {
			t.Fatalf("%d %s", r.status, r.body)
		}
		ids[i] = decodeAs[jobStatus](t, r).ID
	}
	for i, id := range ids {
		st := s.waitJob(id)
		wantObject := map[bool]string{true: "chat.completion", false: "text_completion"}[i%2 == 0]
		if st.Status != "succeeded" || st.Result == nil || st.Result.Object != wantObject || st.Result.Usage.CompletionTokens != 2 {
			t.Fatalf("job %d: %+v", i, st)
		}
	}
	if st := s.waitJob(queued.ID); st.Status != "cancelled" {
		t.Fatalf("the cancelled job: %+v", st)
	}

	t.Run("n over 1 is for the synchronous routes", func(t *testing.T) {
		r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"x","n":2}}`)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "submit one job per choice") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("logprobs", func(t *testing.T) {
		r := s.postKey("/v1/jobs", "", `{"type":"chat.completion","request":{"messages":[{"role":"user","content":"x"}],
			"max_tokens":3,"logprobs":true,"top_logprobs":1}}`)
		id := decodeAs[jobStatus](t, r).ID
		s.waitJob(id)
		var st struct {
			Result struct {
				Choices []struct {
					Logprobs *struct {
						Content []struct {
							TopLogprobs []any `json:"top_logprobs"`
						}
					}
				}
			}
		}
		got := s.call(http.MethodGet, "/v1/jobs/"+id)
		if err := json.Unmarshal(got.body, &st); err != nil || len(st.Result.Choices) != 1 || st.Result.Choices[0].Logprobs == nil ||
			len(st.Result.Choices[0].Logprobs.Content) == 0 || len(st.Result.Choices[0].Logprobs.Content[0].TopLogprobs) != 1 {
			t.Fatalf("%s", got.body)
		}
	})

	t.Run("webhook", func(t *testing.T) {
		r := s.postKey("/v1/jobs", "", `{"type":"chat.completion","webhook":"`+receiver.URL+`/hook?token=abc",
			"request":{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}}`)
		id := decodeAs[jobStatus](t, r).ID
		d := waitFor(t, hooks, 20*time.Second, "the webhook")
		ts, _, _ := strings.Cut(strings.TrimPrefix(d.sig, "t="), ",")
		sec := 0
		fmt.Sscan(ts, &sec)
		if want := httpapi.Sign(secret, time.Unix(int64(sec), 0), d.body); d.sig != want || sec == 0 {
			t.Fatalf("signature %q, want %q", d.sig, want)
		}
		st := decodeAs[jobStatus](t, response{status: 200, body: d.body})
		if st.ID != id || st.Status != "succeeded" || st.Result == nil || st.Result.Object != "chat.completion" {
			t.Fatalf("webhook body %s", d.body)
		}
	})
	for _, tt := range []struct{ name, body, message string }{
		{"webhook host not allowed", `{"type":"completion","webhook":"https://evil.example/x","request":{"prompt":"x"}}`, "not allowed"},
		{"webhook not http", `{"type":"completion","webhook":"file:///etc/passwd","request":{"prompt":"x"}}`, "http or https"},
		{"unknown type", `{"type":"audio.transcription","request":{}}`, "type must be"},
		{"invalid request", `{"type":"completion","request":{"prompt":"x","temperature":9}}`, "temperature"},
		{"streaming", `{"type":"chat.completion","request":{"messages":[{"role":"user","content":"x"}],"stream":true}}`, "synchronous routes"},
		{"image on a text variant", `{"type":"image","request":{"prompt":"x"}}`, "image variant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey("/v1/jobs", "", tt.body)
			if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, tt.message) {
				t.Fatalf("%d %s; want 400 with %q", r.status, r.body, tt.message)
			}
		})
	}
	if r := s.call(http.MethodGet, "/v1/jobs/no-such-job"); r.status != http.StatusNotFound {
		t.Fatalf("unknown job: %d %s", r.status, r.body)
	}
}

func TestWebhookLoopbackRefusedByDefault(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{Async: httpapi.AsyncConfig{
		WebhookSecret: "x", WebhookAllow: []string{"127.0.0.1", "::1"}}}})
	for _, hook := range []string{"http://127.0.0.1:9/x", "http://[::1]:9/x"} {
		r := s.postKey("/v1/jobs", "", `{"type":"completion","webhook":"`+hook+`","request":{"prompt":"x"}}`)
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", hook, r.status, r.body)
		}
	}
}

// A job reads queued until a worker starts it, running while it runs (the
// worker's running mark), then succeeded.
func TestAsyncJobRunning(t *testing.T) {
	s := newStack(t, stackOptions{})
	r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"sleep:1500"}}`)
	id := decodeAs[jobStatus](t, r).ID
	if r.status != http.StatusAccepted || id == "" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if st := decodeAs[jobStatus](t, s.call(http.MethodGet, "/v1/jobs/"+id)); st.Status != "queued" {
		t.Fatalf("before any worker: %+v", st)
	}
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	waitFor(t, b.started, 10*time.Second, "the job to start")
	var seen []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st := decodeAs[jobStatus](t, s.call(http.MethodGet, "/v1/jobs/"+id))
		if len(seen) == 0 || seen[len(seen)-1] != st.Status {
			seen = append(seen, st.Status)
		}
		if st.Status != "queued" && st.Status != "running" {
			break
		}
	}
	// The mark is written before the run, the backend's start signal within
	// it: no queued after the start.
	if strings.Join(seen, " ") != "running succeeded" {
		t.Fatalf("statuses after the start: %v; want running, then succeeded", seen)
	}
}

// TestAsyncJobProgress: GET /v1/jobs/{id} shows a running job's progress
// as its backend reports it, and none once it is done.
func TestAsyncJobProgress(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{Async: httpapi.AsyncConfig{PollEvery: 50 * time.Millisecond}}})
	s.startWorker(newTestBackend(1), time.Second)
	r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"steps:8","max_tokens":2}}`)
	id := decodeAs[jobStatus](t, r).ID
	type withProgress struct {
		Status   string `json:"status"`
		Progress *struct {
			Done  int `json:"done"`
			Total int `json:"total"`
		} `json:"progress"`
	}
	seen := map[int]bool{}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		st := decodeAs[withProgress](t, s.call(http.MethodGet, "/v1/jobs/"+id))
		if st.Status == "succeeded" {
			if st.Progress != nil || len(seen) < 2 {
				t.Fatalf("done with progress %+v; steps seen while running: %v", st.Progress, seen)
			}
			return
		}
		if st.Progress != nil {
			if st.Status != "running" || st.Progress.Total != 8 || st.Progress.Done < 1 || st.Progress.Done > 8 {
				t.Fatalf("%s with progress %+v", st.Status, *st.Progress)
			}
			seen[st.Progress.Done] = true
		}
	}
	t.Fatal("the job never finished")
}
