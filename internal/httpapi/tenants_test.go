package httpapi

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// tenantServer is a server of variant over jobs whose keys are lines of
// API_KEYS_FILE, its counters in memory.
func tenantServer(t *testing.T, variant genq.Variant, jobs fakeJobs, lines ...string) http.Handler {
	t.Helper()
	keys, err := tenant.ParseKeys("", strings.Join(lines, "\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	return NewServer(Config{Variant: variant, MaxBodyBytes: 1 << 20, MaxPromptBytes: 1 << 10, JobTimeout: time.Minute},
		Deps{Jobs: jobs, Workers: fakeWorkers{{WorkerID: "w1", Model: "tiny.gguf"}}, Registry: prometheus.NewRegistry(),
			NewID: func() string { ids++; return "job-" + string(rune('0'+ids%10)) }, Log: slog.New(slog.DiscardHandler),
			Keys: tenant.NewKeys(keys), Limiter: tenant.NewLimiter(tenant.NewMemStore(), "api-1")})
}

func send(h http.Handler, method, path, body string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestLimitAnswers: the second request of a key limited to one a minute
// is a 429 in its route's shape, with Retry-After and the rate-limit
// headers of its route's vendor.
func TestLimitAnswers(t *testing.T) {
	textJobs := fakeJobs{contentType: "application/json", attempt: 1,
		body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`}
	imageJobs := fakeJobs{contentType: "image/png", attempt: 1, body: "\x89PNG"}
	bearer := http.Header{"Authorization": {"Bearer k-one"}}
	for _, tt := range []struct {
		name, path, body string
		variant          genq.Variant
		jobs             fakeJobs
		header           http.Header
		wantBody         string
		anthropic        bool
	}{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, genq.VariantB, textJobs, bearer,
			`"type":"requests","param":null,"code":"rate_limit_exceeded"`, false},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}]}`, genq.VariantB, textJobs,
			http.Header{"X-Api-Key": {"k-one"}}, `{"type":"error","error":{"type":"rate_limit_error","message":"rate limit reached on rpm`, true},
		{"generate", "/generate", `{"text":"x"}`, genq.VariantB, textJobs, bearer, `{"error":"rate limit reached on rpm`, false},
		{"images", "/v1/images/generations", `{"prompt":"x"}`, genq.VariantC, imageJobs, bearer, `"code":"rate_limit_exceeded"`, false},
		{"txt2img", "/sdapi/v1/txt2img", `{"prompt":"x"}`, genq.VariantC, imageJobs,
			http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("user:k-one"))}},
			`{"error":"Too Many Requests","detail":"rate limit reached on rpm`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := tenantServer(t, tt.variant, tt.jobs, "k-one tenant=one rpm=1")
			if rec := send(h, "POST", tt.path, tt.body, tt.header); rec.Code != 200 || rec.Header().Get("X-Ratelimit-Remaining-Requests") != "0" {
				t.Fatalf("the first request: %d %v %s", rec.Code, rec.Header(), rec.Body)
			}
			rec := send(h, "POST", tt.path, tt.body, tt.header)
			h2 := rec.Header()
			if rec.Code != 429 || !strings.Contains(rec.Body.String(), tt.wantBody) || h2.Get("Retry-After") == "" ||
				h2.Get("Retry-After-Ms") == "" || h2.Get("X-Ratelimit-Limit-Requests") != "1" {
				t.Fatalf("the second request: %d %v %s", rec.Code, h2, rec.Body)
			}
			if got := h2.Get("Anthropic-Ratelimit-Requests-Limit") == "1"; got != tt.anthropic {
				t.Errorf("Anthropic's headers: %v, want %v", got, tt.anthropic)
			}
		})
	}
}

// TestKeySchemes: a key opens as Bearer (any case), x-api-key, or a
// Basic password; nothing else does.
func TestKeySchemes(t *testing.T) {
	h := tenantServer(t, genq.VariantB, fakeJobs{contentType: "application/json", body: `{"generated_text":"hi"}`}, "k-one tenant=one")
	basic := func(userPass string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass)) }
	for _, tt := range []struct {
		header http.Header
		status int
	}{
		{http.Header{"Authorization": {"Bearer k-one"}}, 200},
		{http.Header{"Authorization": {"bEaReR k-one"}}, 200},
		{http.Header{"X-Api-Key": {"k-one"}}, 200},
		{http.Header{"Authorization": {basic("anyone:k-one")}}, 200},
		{http.Header{"Authorization": {basic("k-one:")}}, 401},
		{http.Header{"Authorization": {"Basic k-one"}}, 401},
		{http.Header{"Authorization": {"Token k-one"}}, 401},
		{http.Header{"Authorization": {"Bearer k-on"}}, 401},
		{http.Header{"Authorization": {"Bearer nope"}, "X-Api-Key": {"k-one"}}, 401},
		{http.Header{}, 401},
	} {
		rec := send(h, "POST", "/generate", `{"text":"x"}`, tt.header)
		if rec.Code != tt.status {
			t.Errorf("%v: %d, want %d", tt.header, rec.Code, tt.status)
		}
		if body, _ := io.ReadAll(rec.Body); strings.Contains(string(body), "k-on") {
			t.Errorf("%v: the answer holds the key: %s", tt.header, body)
		}
	}
}

// A keyed request's jobs are queued with its tenant's share, weight
// included, for the queue's fair share; without keys, with none.
func TestJobsCarryTheTenantsShare(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"x"}]}`
	for _, tt := range []struct {
		name   string
		keyed  bool
		header http.Header
		want   genq.Share
	}{
		{"keyed", true, http.Header{"Authorization": {"Bearer k-one"}}, genq.Share{Tenant: "one", Weight: 3}},
		{"open", false, nil, genq.Share{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var shares []genq.Share
			jobs := fakeJobs{contentType: "application/json", attempt: 1, shares: &shares,
				body: `{"generated_text":"hi","finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}`}
			h, _ := testServer(t, genq.VariantB, jobs)
			if tt.keyed {
				h = tenantServer(t, genq.VariantB, jobs, "k-one tenant=one weight=3")
			}
			if rec := send(h, "POST", "/v1/chat/completions", body, tt.header); rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if len(shares) != 1 || shares[0].Tenant != tt.want.Tenant || shares[0].Weight != tt.want.Weight {
				t.Fatalf("queued with %+v, want one job of %+v", shares, tt.want)
			}
		})
	}
}

// ctxStore is the counters in memory, refusing a write whose context has
// ended, as JetStream's does.
type ctxStore struct{ *tenant.MemStore }

func (s ctxStore) Update(ctx context.Context, key string, c tenant.Counters, rev uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.MemStore.Update(ctx, key, c, rev)
}

// TestMeterQueuedOutlivesItsCaller: queued work's usage is counted even
// when the context that found it has ended (a poller who left, or the
// short bound of meterStored's look-up): its record is already marked
// metered, so a count cut short would be lost for good.
func TestMeterQueuedOutlivesItsCaller(t *testing.T) {
	limiter := tenant.NewLimiter(ctxStore{tenant.NewMemStore()}, "api-1")
	s := &Server{log: slog.New(slog.DiscardHandler), limiter: limiter, metrics: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 })}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s.meterQueued(ctx, "team", jobsRoute, tenant.Usage{PromptTokens: 3, CompletionTokens: 4})
	got, err := limiter.Today(t.Context(), "team")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tokens != 7 || len(got.Usage) != 1 || got.Usage[0].Requests != 1 {
		t.Fatalf("counted %+v, want 1 request of 7 tokens", got)
	}
}

// TestSettleOutlivesItsCaller: a request's settlement lands though the
// request's context has ended (a client gone, an api shutting down after
// answering 503s): its usage is counted and its lease leaves the tenant's
// requests in flight.
func TestSettleOutlivesItsCaller(t *testing.T) {
	limiter := tenant.NewLimiter(ctxStore{tenant.NewMemStore()}, "api-1")
	s := &Server{log: slog.New(slog.DiscardHandler), limiter: limiter, metrics: newMetrics(prometheus.NewRegistry(), func() float64 { return 0 })}
	// A limit puts the request's lease on the record (an open tenant's
	// has none: its usage waits for a flush).
	team := tenant.Tenant{Name: "team", Limits: tenant.Limits{Concurrency: 10}}
	tk, err := limiter.Admit(t.Context(), team, tenant.Cost{Tokens: 10}, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{tenant: team, admitted: true, ticket: &tk, took: tenant.Usage{Model: "tiny", PromptTokens: 3, CompletionTokens: 4}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s.settle(ctx, c, "/v1/chat/completions")
	got, err := limiter.Today(t.Context(), "team")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tokens != 7 || len(got.InFlight) != 0 || len(got.Usage) != 1 || got.Usage[0].Requests != 1 {
		t.Fatalf("counted %+v, want 1 request of 7 tokens and none in flight", got)
	}
}
