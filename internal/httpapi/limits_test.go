package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

// countedJobs answers every text job, counting them.
type countedJobs struct{ n atomic.Int64 }

func (c *countedJobs) Run(_ context.Context, job genq.Job) (*genq.ReceivedResult, error) {
	c.n.Add(1)
	return &genq.ReceivedResult{JobID: job.ID, ContentType: "application/json", Attempt: 1, Worker: "w1",
		Body: io.NopCloser(strings.NewReader(`{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`))}, nil
}

// TestRequestsCheckedAgainstTheWorkersLimits: the api refuses at once, in
// the route's error shape, what the live workers' heartbeats say their
// models cannot serve, and a request of more jobs than the queue holds;
// no job is queued for either. With no worker that tells its limits, the
// job is queued for the worker to check.
func TestRequestsCheckedAgainstTheWorkersLimits(t *testing.T) {
	text := &genq.Limits{MaxNewTokens: 16, ContextSize: 64, VocabSize: 100}
	image := &genq.Limits{ImageMaxSize: 128, ImageMaxSteps: 4}
	for _, tt := range []struct {
		name, path, body string
		variant          genq.Variant
		limits           []*genq.Limits // one live worker each
		status           int
		want             string
	}{
		{"max_tokens at the cap", "/v1/completions", `{"prompt":"x","max_tokens":16}`, genq.VariantB, []*genq.Limits{text}, 200, `"text_completion"`},
		{"max_tokens over the cap: capped", "/v1/completions", `{"prompt":"x","max_tokens":32000}`, genq.VariantB, []*genq.Limits{text}, 200, `"text_completion"`},
		{"max_completion_tokens over the cap: capped", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":32000}`,
			genq.VariantB, []*genq.Limits{text}, 200, `"chat.completion"`},
		{"a worker that tells no limits", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 99) + `1],"max_tokens":17}`, genq.VariantB, []*genq.Limits{nil}, 200, `"text_completion"`},
		{"no live worker", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 99) + `1],"max_tokens":17}`, genq.VariantB, nil, 200, `"text_completion"`},
		{"a token id past the vocabulary", "/v1/completions", `{"prompt":[[1],[100]]}`, genq.VariantB, []*genq.Limits{text}, 400,
			`"message":"prompt[1]: prompt holds the token id 100; this model's vocabulary has tokens 0 to 99"`},
		{"token ids that leave the answer less than the cap", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 60) + `1]}`, genq.VariantB, []*genq.Limits{text}, 200, `"text_completion"`},
		{"token ids past the context", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 63) + `1]}`, genq.VariantB, []*genq.Limits{text}, 400,
			`{"error":{"message":"This model's maximum context length is 64 tokens. However, your prompt resulted in 64 tokens. Please reduce the length of the prompt.","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"}}`},
		{"token ids and max_tokens past the context", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 59) + `1],"max_tokens":8}`, genq.VariantB, []*genq.Limits{text}, 400,
			`you requested 68 tokens (60 in the prompt, 8 in the completion)`},
		{"the tightest worker's context", "/v1/completions", `{"prompt":[` + strings.Repeat("1,", 63) + `1]}`, genq.VariantB,
			[]*genq.Limits{{ContextSize: 4096}, text, nil}, 400, `"code":"context_length_exceeded"`},
		{"prompts × n over the queue", "/v1/completions", `{"prompt":["a","b","c"],"n":2}`, genq.VariantB, []*genq.Limits{text}, 400,
			`this request asks for 6 answers (prompts × n), and the queue holds at most 4 jobs (QUEUE_CAPACITY): ask for fewer`},
		{"n over the queue", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":5}`, genq.VariantB, nil, 400,
			`the queue holds at most 4 jobs (QUEUE_CAPACITY)`},
		{"images over the queue", "/v1/images/generations", `{"prompt":"x","n":5}`, genq.VariantC, nil, 400,
			`this request asks for 5 images (n), and the queue holds at most 4 jobs (QUEUE_CAPACITY): ask for fewer`},
		{"image over the worker's size", "/v1/images/generations", `{"prompt":"x","size":"256x256"}`, genq.VariantC, []*genq.Limits{image}, 400,
			`width and height must be multiples of 16 from 64 to 128`},
		{"image over the worker's steps", "/v1/images/generations", `{"prompt":"x","num_inference_steps":5}`, genq.VariantC, []*genq.Limits{image}, 400,
			`num_inference_steps must be between 1 and 4, not 5`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var workers fakeWorkers
			for i, l := range tt.limits {
				workers = append(workers, genq.Heartbeat{WorkerID: "w" + strconv.Itoa(i), Model: "tiny.gguf", Limits: l})
			}
			jobs := &countedJobs{}
			ids := 0
			h := NewServer(Config{Variant: tt.variant, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute, QueueCapacity: 4,
				Images: ImageLimits{MaxSize: 1024, MaxSteps: 50, MaxN: 8}},
				Deps{Jobs: jobs, Workers: workers, Registry: prometheus.NewRegistry(),
					NewID: func() string { ids++; return "job-" + strconv.Itoa(ids) }, Log: slog.New(slog.DiscardHandler)})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("%d %s, want %d with %s", rec.Code, rec.Body, tt.status, tt.want)
			}
			if tt.status != 200 && jobs.n.Load() != 0 {
				t.Fatalf("a refused request queued %d jobs", jobs.n.Load())
			}
		})
	}
}

// TestRequestID: every response, errors and routes that run no job
// included, carries an id of its own in X-Request-Id, apart from the job's.
func TestRequestID(t *testing.T) {
	h, _ := testServer(t, genq.VariantB, fakeJobs{contentType: "application/json", attempt: 1,
		body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`})
	seen := map[string]bool{}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/nowhere", ""}, {"GET", "/v1/models", ""}, {"POST", "/v1/completions", `{"prompt":"x"}`},
		{"POST", "/v1/completions", `{}`}, {"DELETE", "/v1/models", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(req.method, req.path, strings.NewReader(req.body)))
		id := rec.Header().Get("X-Request-Id")
		if !strings.HasPrefix(id, "req_") || len(id) < 20 || seen[id] {
			t.Errorf("%s %s: X-Request-Id %q", req.method, req.path, id)
		}
		seen[id] = true
		if job := rec.Header().Get(HeaderJobID); rec.Code == 200 && req.method == "POST" && job != "job-1" {
			t.Errorf("%s %s: %s %q", req.method, req.path, HeaderJobID, job)
		}
	}
}

// TestImageLimitsComeFromTheWorkers: an api told no image size or steps
// (as cmd/api, which has no such setting) bounds an image request by the
// live workers' IMAGE_MAX_SIZE and IMAGE_MAX_STEPS, whatever they are, and
// with no worker that tells them by the protocol's bounds alone.
func TestImageLimitsComeFromTheWorkers(t *testing.T) {
	big := &genq.Limits{ImageMaxSize: 2048, ImageMaxSteps: 200}
	for _, tt := range []struct {
		name, body string
		limits     []*genq.Limits
		want       string // the refusal; "" queues the job
	}{
		{"past the old default, within the worker's", `{"prompt":"x","size":"2048x2048","num_inference_steps":150}`, []*genq.Limits{big}, ""},
		{"past the worker's size", `{"prompt":"x","size":"2064x2048"}`, []*genq.Limits{big}, "from 64 to 2048"},
		{"past the worker's steps", `{"prompt":"x","num_inference_steps":201}`, []*genq.Limits{big}, "between 1 and 200, not 201"},
		{"the tightest worker's", `{"prompt":"x","size":"256x256"}`, []*genq.Limits{big, {ImageMaxSize: 128}}, "from 64 to 128"},
		{"no live worker: the protocol's size", `{"prompt":"x","size":"4096x4096","num_inference_steps":1000}`, nil, ""},
		{"no live worker: past the protocol's size", `{"prompt":"x","size":"4112x64"}`, nil, "from 64 to 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var workers fakeWorkers
			for i, l := range tt.limits {
				workers = append(workers, genq.Heartbeat{WorkerID: "w" + strconv.Itoa(i), Model: "sd3", Limits: l})
			}
			jobs := &countedJobs{}
			h := NewServer(Config{Variant: genq.VariantC, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute, QueueCapacity: 4,
				Images: ImageLimits{MaxN: 2}},
				Deps{Jobs: jobs, Workers: workers, Registry: prometheus.NewRegistry(), NewID: func() string { return "job" }, Log: slog.New(slog.DiscardHandler)})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/images/generations", strings.NewReader(tt.body)))
			if tt.want == "" {
				if jobs.n.Load() != 1 {
					t.Fatalf("%d %s: the job was not queued", rec.Code, rec.Body)
				}
				return
			}
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), tt.want) || jobs.n.Load() != 0 {
				t.Fatalf("%d %s (%d jobs queued); want 400 with %q, none queued", rec.Code, rec.Body, jobs.n.Load(), tt.want)
			}
		})
	}
}
