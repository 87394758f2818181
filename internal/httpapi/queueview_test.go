package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// fixedQueues are the tenants' consumers as a queue would list them.
type fixedQueues struct {
	lines []genq.TenantQueue
	err   error
}

func (f fixedQueues) TenantQueues(context.Context) ([]genq.TenantQueue, error) { return f.lines, f.err }

var someQueues = fixedQueues{lines: []genq.TenantQueue{
	{Tenant: "a", Queue: genq.VariantB, Class: "interactive", Waiting: 5, Running: 2},
	{Tenant: "a", Queue: genq.VariantB, Class: "batch", Waiting: 7, Running: 0},
	{Tenant: "b", Queue: genq.VariantB, Class: "interactive", Waiting: 1, Running: 1},
	{Tenant: "b", Queue: "chat_qwen3", Class: "interactive", Waiting: 4, Running: 3},
}}

// TestQueueDepthRoute: GET /queue on the internal address sums a queue's
// tenants' jobs over every tenant and class, what KEDA scales on; it is
// not there without the tenants' queues, and NATS away is a 503.
func TestQueueDepthRoute(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		queues     TenantQueues
		status     int
		jobs       uint64 // with status 200
		tenants    int
	}{
		{"one queue", "/queue?queue=B", someQueues, 200, 5 + 2 + 7 + 1 + 1, 3},
		{"a model's queue", "/queue?queue=chat_qwen3", someQueues, 200, 4 + 3, 1},
		{"a queue with no tenant", "/queue?queue=C", someQueues, 200, 0, 0},
		{"every queue", "/queue", someQueues, 200, 23, 4},
		{"NATS away", "/queue?queue=B", fixedQueues{err: genq.WrapError(genq.Unavailable, errors.New("no servers"), "the queue is unavailable")}, 503, 0, 0},
		{"no tenants' queues", "/queue?queue=B", nil, 404, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewMetricsHandler(prometheus.NewRegistry(), tc.queues, slog.New(slog.DiscardHandler))
			rec := send(h, http.MethodGet, tc.path, "", nil)
			if rec.Code != tc.status {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			var d queueDepth
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
				t.Fatal(err)
			}
			if d.Jobs != tc.jobs || d.Waiting+d.Running != d.Jobs || len(d.Tenants) != tc.tenants {
				t.Fatalf("%s: %+v; want %d jobs over %d tenants' lines", rec.Body, d, tc.jobs, tc.tenants)
			}
		})
	}
}

// TestQueueViewTenants: the queue view's tenants' lines say each tenant's
// jobs waiting and running apart, summed over queues and classes, beside
// its usage today; an admin key sees every tenant, one with jobs queued
// but no request today too, and a tenant's key its own line alone.
func TestQueueViewTenants(t *testing.T) {
	keys, err := tenant.ParseKeys("", "k-a tenant=a\nk-admin tenant=ops admin=true", "test")
	if err != nil {
		t.Fatal(err)
	}
	textJobs := fakeJobs{contentType: "application/json", attempt: 1,
		body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`}
	h := NewServer(Config{Variant: genq.VariantB, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: textJobs, Workers: fakeWorkers(nil), Registry: prometheus.NewRegistry(), TenantQueues: someQueues,
			NewID: func() string { return "job-1" }, Log: slog.New(slog.DiscardHandler),
			Keys: tenant.NewKeys(keys), Limiter: tenant.NewLimiter(tenant.NewMemStore(), "api-1")})
	bearer := func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }
	if rec := send(h, http.MethodPost, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, bearer("k-a")); rec.Code != 200 {
		t.Fatalf("chat: %d %s", rec.Code, rec.Body)
	}
	lines := func(key string) []tenantToday {
		rec := send(h, http.MethodGet, "/ui/api/status", "", bearer(key))
		var st uiStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
			t.Fatalf("status: %d %s", rec.Code, rec.Body)
		}
		return st.Tenants
	}
	a := tenantToday{Tenant: "a", Waiting: 12, Running: 2, Requests: 1, PromptTokens: 2, CompletionTokens: 1}
	b := tenantToday{Tenant: "b", Waiting: 5, Running: 4}
	for _, tc := range []struct {
		key  string
		want []tenantToday
	}{
		{"k-admin", []tenantToday{a, b}},
		{"k-a", []tenantToday{a}},
	} {
		got := lines(tc.key)
		for i := range got {
			got[i].EngineSeconds = 0 // the fake jobs' run time
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s sees %+v; want %+v", tc.key, got, tc.want)
		}
	}
	if body := send(h, http.MethodGet, "/ui/api/status", "", bearer("k-a")).Body.String(); strings.Contains(body, `"tenant":"b"`) {
		t.Errorf("tenant a's key sees tenant b: %s", body)
	}
}
