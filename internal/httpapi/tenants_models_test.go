package httpapi

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// acceptAsync takes every asynchronous job and keeps nothing: enough for
// POST /v1/jobs to answer, which is all the admission needs.
type acceptAsync struct{}

func (acceptAsync) Submit(context.Context, genq.Job) error { return nil }
func (acceptAsync) Outcome(context.Context, string) (*genq.ReceivedResult, error) {
	return nil, genq.Errorf(genq.NotFound, "no outcome")
}
func (acceptAsync) CancelJob(string)                                   {}
func (acceptAsync) PutJobRecord(context.Context, string, []byte) error { return nil }
func (acceptAsync) JobRecord(context.Context, string) ([]byte, error) {
	return nil, genq.Errorf(genq.NotFound, "none")
}
func (acceptAsync) JobIDs(context.Context) ([]string, error) { return nil, nil }
func (acceptAsync) Running(context.Context, string) (bool, genq.Progress, error) {
	return false, genq.Progress{}, nil
}
func (acceptAsync) UpdateJobRecord(context.Context, string, func([]byte) ([]byte, error)) error {
	return nil
}

// defaultModelServer serves a catalogue of one model of each kind, the
// chat model with an alias, to keys with models= lists.
func defaultModelServer(t *testing.T, jobs Jobs, lines ...string) http.Handler {
	t.Helper()
	keys, err := tenant.ParseKeys("", strings.Join(lines, "\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := genq.NewCatalog([]genq.Model{
		{Name: "llama", Kind: genq.KindChat, Queue: genq.VariantB, Aliases: []string{"gpt-4o"}},
		{Name: "bge", Kind: genq.KindEmbedding, Queue: genq.QueueToken(genq.KindEmbedding, "bge")},
		{Name: "sd", Kind: genq.KindImage, Queue: genq.VariantC},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	return NewServer(Config{Variant: genq.VariantB, Catalog: cat, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: jobs, Async: acceptAsync{}, Workers: fakeWorkers(nil), Fleet: fakeWorkers(nil), Registry: prometheus.NewRegistry(),
			NewID: func() string { ids++; return "job-" + string(rune('0'+ids%10)) },
			Log:   slog.New(slog.DiscardHandler), Keys: tenant.NewKeys(keys)})
}

// TestDefaultModelOutsideKeysList: a request that names no model gets its
// kind's default, which the key's models= list must allow as a named one
// must be: else a 404 model_not_found in the route's shape, with nothing
// queued. A list naming the default, or one of its aliases, lets it in.
func TestDefaultModelOutsideKeysList(t *testing.T) {
	basic := func(key string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+key))}}
	}
	bearer := func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }
	for _, tc := range []struct {
		name, path, body string
		header           func(key string) http.Header
		allow            string // a models= list that lets the request in
		denied           string // what the 404's body holds
	}{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, bearer, "llama", `"code":"model_not_found"`},
		{"chat, by alias", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, bearer, "gpt-4o", `"code":"model_not_found"`},
		{"completions", "/v1/completions", `{"prompt":"x"}`, bearer, "llama", `"code":"model_not_found"`},
		{"responses", "/v1/responses", `{"input":"x"}`, bearer, "llama", `"code":"model_not_found"`},
		{"embeddings", "/v1/embeddings", `{"input":"x"}`, bearer, "bge", `"code":"model_not_found"`},
		{"images", "/v1/images/generations", `{"prompt":"x"}`, bearer, "sd", `"code":"model_not_found"`},
		{"txt2img", "/sdapi/v1/txt2img", `{"prompt":"x"}`, basic, "sd", `{"error":"Not Found"`},
		{"generate", "/generate", `{"text":"x"}`, bearer, "llama", `{"error":"the model \"llama\" does not exist`},
		{"jobs", "/v1/jobs", `{"type":"chat.completion","request":{"messages":[{"role":"user","content":"x"}]}}`, bearer, "llama", `"code":"model_not_found"`},
		{"jobs, embedding", "/v1/jobs", `{"type":"embedding","request":{"input":"x"}}`, bearer, "bge", `"code":"model_not_found"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := &queueJobs{}
			h := defaultModelServer(t, jobs, "k-other models=qwen3", "k-allowed models="+tc.allow)
			rec := send(h, http.MethodPost, tc.path, tc.body, tc.header("k-other"))
			if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), tc.denied) {
				t.Fatalf("a key without the default model: %d %s; want 404 with %s", rec.Code, rec.Body, tc.denied)
			}
			if q := jobs.jobs(); len(q) != 0 {
				t.Fatalf("queued %d jobs for a refused request", len(q))
			}
			if rec := send(h, http.MethodPost, tc.path, tc.body, tc.header("k-allowed")); rec.Code == http.StatusNotFound {
				t.Fatalf("a key whose list allows the default (%s): %d %s", tc.allow, rec.Code, rec.Body)
			}
		})
	}
}
