package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/promtest"
)

// fakeJobs answers every job with one result, redelivered when attempt is
// over 1.
type fakeJobs struct {
	contentType, body string
	attempt           int
	// shares, when set, collects the share each job was queued with.
	shares *[]genq.Share
}

func (f fakeJobs) Run(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
	if f.shares != nil {
		share, _ := genq.ShareOf(ctx)
		*f.shares = append(*f.shares, share)
	}
	return &genq.ReceivedResult{JobID: job.ID, ContentType: f.contentType, Body: io.NopCloser(strings.NewReader(f.body)),
		Attempt: f.attempt, Worker: "w1"}, nil
}

type fakeWorkers []genq.Heartbeat

func (f fakeWorkers) Live() []genq.Heartbeat { return f }

func testServer(t *testing.T, variant genq.Variant, jobs fakeJobs) (http.Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ids := 0
	h := NewServer(Config{Variant: variant, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: jobs, Workers: fakeWorkers{{WorkerID: "w1", Model: "tiny.gguf"}}, Registry: reg,
			NewID: func() string { ids++; return "job-" + string(rune('0'+ids)) }, Log: slog.New(slog.DiscardHandler)})
	return h, reg
}

// counterValue is the value of the counter called name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, ok := promtest.Value(t, reg, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return v
}

func TestRoutes(t *testing.T) {
	textJobs := fakeJobs{contentType: "application/json", attempt: 1,
		body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`}
	for _, tt := range []struct {
		name, method, path, body string
		variant                  genq.Variant
		jobs                     fakeJobs
		status                   int
		want                     string
	}{
		{"chat", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, genq.VariantB, textJobs, 200,
			`{"id":"chatcmpl-job-1","object":"chat.completion","created":`},
		{"stream without a streamer", "POST", "/v1/completions", `{"prompt":"x","stream":true}`, genq.VariantB, textJobs, 400,
			`{"error":{"message":"streaming is not supported by this server; send stream: false","type":"invalid_request_error","param":null,"code":"invalid"}}`},
		{"jobs without async", "POST", "/v1/jobs", `{}`, genq.VariantB, textJobs, 503,
			`{"error":{"message":"asynchronous jobs are not available on this server","type":"service_unavailable_error","param":null,"code":"unavailable"}}`},
		{"job status without async", "GET", "/v1/jobs/abc", ``, genq.VariantB, textJobs, 503, `asynchronous jobs are not available`},
		{"images on a text variant", "POST", "/v1/images/generations", `{"prompt":"x"}`, genq.VariantB, textJobs, 400,
			`variant B makes text: /v1/images/generations needs the image variant (C); use /v1/chat/completions`},
		{"chat on the image variant", "POST", "/v1/chat/completions", `{}`, genq.VariantC, textJobs, 400,
			`variant C makes images: /v1/chat/completions needs a text variant (A or B); use POST /v1/images/generations`},
		{"image", "POST", "/v1/images/generations", `{"prompt":"x"}`, genq.VariantC,
			fakeJobs{contentType: "image/png", body: "PNG", attempt: 1}, 200, `"data":[{"b64_json":"UE5H"}]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := testServer(t, tt.variant, tt.jobs)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("%d %s, want %d with %s", rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
}

// Every route that runs jobs counts their redeliveries.
func TestRedeliveriesCounted(t *testing.T) {
	for _, tt := range []struct {
		name, path, body string
		variant          genq.Variant
		jobs             fakeJobs
		want             float64
	}{
		{"generate", "/generate", `{"text":"x"}`, genq.VariantB, fakeJobs{contentType: "application/json", body: `{"generated_text":"hi"}`, attempt: 2}, 1},
		{"two choices", "/v1/completions", `{"prompt":"x","n":2}`, genq.VariantB,
			fakeJobs{contentType: "application/json", body: `{"generated_text":"hi","finish_reason":"stop"}`, attempt: 2}, 2},
		{"two images", "/v1/images/generations", `{"prompt":"x","n":2}`, genq.VariantC, fakeJobs{contentType: "image/png", body: "PNG", attempt: 3}, 2},
		{"first delivery", "/v1/images/generations", `{"prompt":"x"}`, genq.VariantC, fakeJobs{contentType: "image/png", body: "PNG", attempt: 1}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, reg := testServer(t, tt.variant, tt.jobs)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if got := counterValue(t, reg, "genq_redelivered_jobs_total"); got != tt.want {
				t.Errorf("redeliveries %v, want %v", got, tt.want)
			}
		})
	}
}

// TestUIWeight keeps the embedded web UI small: under 300 KB gzipped, all
// files together.
func TestUIWeight(t *testing.T) {
	var total int
	err := fs.WalkDir(uiFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := uiFiles.ReadFile(p)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(data)
		_ = zw.Close()
		total += buf.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || total > 300<<10 {
		t.Fatalf("the UI weighs %d bytes gzipped; the bound is 300 KB", total)
	}
	t.Logf("the UI weighs %d bytes gzipped", total)
}
