package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

// refusingJobs refuses every job as a worker refuses a conversation its
// context cannot hold, its error as the worker's reply carries it: the
// code invalid and a message.
type refusingJobs struct{ ce genq.ContextExceeded }

func (f refusingJobs) Run(context.Context, genq.Job) (*genq.ReceivedResult, error) {
	return nil, genq.Errorf(genq.Invalid, "%s", f.ce.Error())
}

// newLimitServer is a server of variant B whose live workers tell limits,
// its log written to log.
func newLimitServer(cfg Config, jobs Jobs, limits []*genq.Limits, log *bytes.Buffer) limitServer {
	var workers fakeWorkers
	for i, l := range limits {
		workers = append(workers, genq.Heartbeat{WorkerID: "w" + strconv.Itoa(i), Model: "tiny.gguf", Limits: l})
	}
	cfg.Variant, cfg.MaxBodyBytes, cfg.MaxV1BodyBytes, cfg.JobTimeout = genq.VariantB, 1<<20, 8<<20, time.Minute
	handler := slog.Handler(slog.DiscardHandler)
	if log != nil {
		handler = slog.NewJSONHandler(log, nil)
	}
	ids := 0
	return limitServer{NewServer(cfg, Deps{Jobs: jobs, Workers: workers, Registry: prometheus.NewRegistry(),
		NewID: func() string { ids++; return "job-" + strconv.Itoa(ids) }, Log: slog.New(handler)})}
}

type limitServer struct{ handler http.Handler }

// TestContextRefusalsInEachAPIsWords: a worker's refusal of a
// conversation its context cannot hold reaches each API's clients in that
// API's words: OpenAI's code context_length_exceeded, Anthropic's
// messages, which agents read to ask for fewer tokens or to compact.
func TestContextRefusalsInEachAPIsWords(t *testing.T) {
	withAnswer := genq.ContextExceeded{Prompt: 90000, Answer: 32000, Context: 100000, Input: "messages"}
	promptAlone := genq.ContextExceeded{Prompt: 140000, Context: 131072, Input: "messages"}
	chat := `{"messages":[{"role":"user","content":"x"}],"max_tokens":32000}`
	msg := `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":32000}`
	for _, tt := range []struct {
		name, path, body string
		ce               genq.ContextExceeded
		want             string
	}{
		{"chat, max_tokens past the room", "/v1/chat/completions", chat, withAnswer,
			`{"error":{"message":"This model's maximum context length is 100000 tokens. However, you requested 122000 tokens (90000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		{"responses, prompt past the context", "/v1/responses", `{"input":"x"}`, promptAlone,
			`"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"`},
		{"completions", "/v1/completions", `{"prompt":"x"}`, genq.ContextExceeded{Prompt: 70, Context: 64, Input: "prompt"},
			`"message":"This model's maximum context length is 64 tokens. However, your prompt resulted in 70 tokens. Please reduce the length of the prompt.","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"`},
		{"messages, max_tokens past the room", "/v1/messages", msg, withAnswer,
			`{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 90000 + 32000 > 100000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`},
		{"messages, prompt past the context", "/v1/messages", msg, promptAlone,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 140000 tokens > 131072 maximum"}}`},
		{"generate", "/generate", `{"text":"x"}`, promptAlone,
			`{"error":"This model's maximum context length is 131072 tokens. However, your messages resulted in 140000 tokens. Please reduce the length of the messages."}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newLimitServer(Config{}, refusingJobs{tt.ce}, nil, nil)
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body)))
			// JSON writes ">" as \u003e: the same string to a client.
			if body := strings.ReplaceAll(rec.Body.String(), `\u003e`, ">"); rec.Code != 400 || !strings.Contains(body, tt.want) {
				t.Fatalf("%d %s, want 400 with %s", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// TestPromptBytesFollowTheContext: with MAX_PROMPT_BYTES unset, a
// prompt's bytes are bounded by the longest context the live workers
// announce, or by the longest genq serves when none does; a count takes
// any prompt the body's limit allows.
func TestPromptBytesFollowTheContext(t *testing.T) {
	small := &genq.Limits{ContextSize: 64}
	big := &genq.Limits{ContextSize: 131072}
	chat := func(n int) string {
		return `{"messages":[{"role":"user","content":"` + strings.Repeat("a", n) + `"}]}`
	}
	count := func(n int) string {
		return `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", n) + `"}]}`
	}
	for _, tt := range []struct {
		name, path, body string
		set              int // MAX_PROMPT_BYTES
		limits           []*genq.Limits
		want             string // the refusal, "" when queued
	}{
		{"within 8 bytes a token of the context", "/v1/chat/completions", chat(512), 0, []*genq.Limits{small}, ""},
		{"past 8 bytes a token of the context", "/v1/chat/completions", chat(513), 0, []*genq.Limits{small}, "messages hold 513 bytes of content; the limit is 512"},
		{"the longest context sets it", "/v1/chat/completions", chat(4096), 0, []*genq.Limits{small, big, nil}, ""},
		{"an agent's prompt, no worker announcing", "/v1/chat/completions", chat(400_000), 0, nil, ""},
		{"past the longest context genq serves", "/v1/chat/completions", chat(1<<20 + 1), 0, nil, "the limit is 1048576"},
		{"MAX_PROMPT_BYTES set wins", "/v1/chat/completions", chat(101), 100, []*genq.Limits{big}, "the limit is 100"},
		{"a count of any length", "/v1/messages/count_tokens", count(4096), 0, []*genq.Limits{small}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobs := &countedJobs{}
			s := newLimitServer(Config{MaxPromptBytes: tt.set}, jobs, tt.limits, nil)
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body)))
			switch {
			case tt.want == "" && (rec.Code != 200 || jobs.n.Load() != 1):
				t.Fatalf("%d %s, want it queued", rec.Code, rec.Body)
			case tt.want != "" && (rec.Code != 400 || !strings.Contains(rec.Body.String(), tt.want) || jobs.n.Load() != 0):
				t.Fatalf("%d %s, want 400 with %q", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// TestRefusalsAreLoggedOnce: every refused request leaves one line in the
// api's log, whatever refused it (the body's decoding, the checks, the
// worker), with its route, status, field and reason, and nothing of its
// body or its key.
func TestRefusalsAreLoggedOnce(t *testing.T) {
	const secret = "SECRET-CONTENT"
	key := "sk-" + secret
	ce := genq.ContextExceeded{Prompt: 90000, Answer: 32000, Context: 100000, Input: "messages"}
	for _, tt := range []struct {
		name, path, body string
		jobs             Jobs
		key              string
		want             map[string]any
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + secret + `"}]`, &countedJobs{}, key,
			map[string]any{"msg": "request refused", "route": "/v1/chat/completions", "method": "POST", "status": 400.0, "code": "invalid"}},
		{"a field out of range", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + secret + `"}],"temperature":3}`, &countedJobs{}, key,
			map[string]any{"msg": "request refused", "route": "/v1/chat/completions", "status": 400.0, "field": "temperature"}},
		{"Anthropic's field", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"` + secret + `"}],"max_tokens":0}`, &countedJobs{}, key,
			map[string]any{"msg": "request refused", "route": "/v1/messages", "status": 400.0, "field": "max_tokens"}},
		{"the worker's refusal", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"` + secret + `"}],"max_tokens":32000}`, refusingJobs{ce}, key,
			map[string]any{"msg": "request refused", "route": "/v1/messages", "status": 400.0, "field": "messages", "reason": ce.Error()}},
		{"a wrong key", "/v1/chat/completions", `{}`, &countedJobs{}, "sk-wrong-" + secret,
			map[string]any{"msg": "request refused", "route": "/v1/chat/completions", "status": 401.0, "code": "unauthorized"}},
		{"the seed route", "/generate", `{"text":""}`, &countedJobs{}, key,
			map[string]any{"msg": "request refused", "route": "/generate", "status": 400.0, "field": "text", "reason": "text field is required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			s := newLimitServer(Config{APIKeys: []string{key}}, tt.jobs, nil, &log)
			req := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.key)
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)
			if rec.Code < 400 {
				t.Fatalf("%d %s: not refused", rec.Code, rec.Body)
			}
			if strings.Contains(log.String(), secret) {
				t.Fatalf("the log holds the body or the key:\n%s", log.String())
			}
			var lines []map[string]any
			for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
				var line map[string]any
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if line["status"] != nil || line["code"] != nil {
					lines = append(lines, line)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines of the refusal, want 1:\n%s", len(lines), log.String())
			}
			for k, v := range tt.want {
				if lines[0][k] != v {
					t.Errorf("%s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
				}
			}
			if lines[0]["reason"] == nil || lines[0]["reason"] == "" {
				t.Errorf("no reason: %v", lines[0])
			}
		})
	}
}

// TestFieldOf: the field a refusal's message opens with, and none where
// it opens with words.
func TestFieldOf(t *testing.T) {
	for msg, want := range map[string]string{
		"max_tokens must be at least 1, not 0":                   "max_tokens",
		"messages[2]: role \"x\" is not one of system":           "messages[2]",
		"tools.0.name: Field required":                           "tools.0.name",
		"temperature: must be between 0 and 1, not 3":            "temperature",
		"n must be between 1 and 8, not 9":                       "n",
		"text field is required":                                 "text",
		"messages hold 513 bytes of content; the limit is 512":   "messages",
		"request body is over the limit of 10 bytes":             "",
		"a valid API key is required: send Authorization":        "",
		"the queue is full; retry later":                         "",
		"this request asks for 6 answers (prompts × n), and the": "",
	} {
		if got := fieldOf(genq.Errorf(genq.Invalid, "%s", msg)); got != want {
			t.Errorf("fieldOf(%q) = %q, want %q", msg, got, want)
		}
	}
}
