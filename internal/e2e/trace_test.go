package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/otelcoltest"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/tracing"
	"github.com/genq/genq/internal/worker"
)

// OTLP's span kinds, as the collector writes them.
const (
	kindInternal = 1
	kindServer   = 2
	kindProducer = 4
	kindConsumer = 5
)

// TestTraceThroughQueue follows one chat request, sent with a caller's
// traceparent, from the api through NATS into a worker running the real
// engine, as a real OpenTelemetry Collector received it: the api exports
// over OTLP/HTTP, the worker over gRPC. Every span is under the caller's
// trace id, parented as docs/observability.md draws it, and neither the
// API key, nor the NATS password, nor the query string is in anything the
// collector got.
func TestTraceThroughQueue(t *testing.T) {
	col := otelcoltest.Start(t)
	apiKey := "sk-trace-" + rand.Text()
	natsPassword := "nats-" + rand.Text()
	api := startTracing(t, tracing.Config{Endpoint: col.HTTP, Protocol: tracing.ProtocolHTTP, ServiceName: "genq-api"})
	wrk := startTracing(t, tracing.Config{Endpoint: col.GRPC, Protocol: tracing.ProtocolGRPC, ServiceName: "genq-worker"})
	s := newStack(t, stackOptions{http: httpapi.Config{APIKeys: []string{apiKey}}, tracing: api.Provider,
		natsAuth: natsqueue.ConnectOptions{User: "genq", Password: natsPassword}})
	model := s.tracedTextWorker(wrk)

	traceID, caller := randomHex(16), randomHex(8)
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"Hello!"}],"max_tokens":4,"seed":1}`
	resp := s.postTraced("/v1/chat/completions?note=query-"+natsPassword, body, traceID, caller, apiKey)
	chat := decodeAs[chatCompletion](t, resp)
	if resp.status != http.StatusOK || chat.Usage.CompletionTokens != 4 {
		t.Fatalf("status %d, usage %+v: %s", resp.status, chat.Usage, resp.body)
	}

	spans, err := waitSpans(t, col, []tracing.Tracing{api, wrk}, func(all []otelcoltest.Span) bool {
		names := byName(inTrace(all, traceID))
		// Each service's last span: the run's ends after its reply, the
		// server's after the answer.
		return names["run job"] != nil && names["POST /v1/chat/completions"] != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(inTrace(spans, traceID))
	checkTraceTree(t, got, caller)
	// A plain key's tenant is named by its digest, never by the key.
	if s := got["POST /v1/chat/completions"]; s != nil {
		if name, _ := s.Attributes["genq.tenant"].(string); !strings.HasPrefix(name, "key-") {
			t.Errorf("the server span's tenant is %q, want the key's tenant, key-...", name)
		}
	}
	checkQueueWait(t, got)
	checkEngineSpans(t, got, chat.Usage.PromptTokens, chat.Usage.CompletionTokens)

	exported, err := col.Raw()
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"the API key": apiKey, "the NATS password": natsPassword, "the query string": "query-"} {
		if strings.Contains(string(exported), secret) {
			t.Errorf("the collector received %s", name)
		}
	}
	if lower := strings.ToLower(string(exported)); strings.Contains(lower, "authorization") || strings.Contains(lower, "bearer") {
		t.Error("the collector received an authorization header")
	}
}

// tracedTextWorker runs a worker over the tiny model whose spans p makes,
// and returns the model's name.
func (s *stack) tracedTextWorker(p tracing.Tracing) string {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), tinygguf.FileName(genq.VariantB, "tiny"))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		s.t.Fatal(err)
	}
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: path, Slots: 1, Threads: 1, MaxNewTokens: 4, IgnoreEOS: true}, testLog(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { b.Close() })
	s.runWorkerWith(b, worker.Config{DrainGrace: time.Second, Tracing: p.Provider})
	s.waitLive(1)
	return filepath.Base(path)
}

// postTraced posts a JSON body as a traced caller would: parent, a span
// of trace traceID, is the request's parent; key, when set, its API key.
func (s *stack) postTraced(path, body, traceID, parent, key string) response {
	s.t.Helper()
	h := keyHeader(key)
	h.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	return s.postHeader(path, body, h)
}

// tracedStack starts a collector and a stack whose api exports to it,
// and the provider a worker of the stack exports with; both over OTLP/HTTP.
func tracedStack(t *testing.T) (col *otelcoltest.Collector, s *stack, api, wrk tracing.Tracing) {
	t.Helper()
	col = otelcoltest.Start(t)
	api = startTracing(t, tracing.Config{Endpoint: col.HTTP, ServiceName: "genq-api"})
	wrk = startTracing(t, tracing.Config{Endpoint: col.HTTP, ServiceName: "genq-worker"})
	return col, newStack(t, stackOptions{tracing: api.Provider}), api, wrk
}

func startTracing(t *testing.T, c tracing.Config) tracing.Tracing {
	t.Helper()
	tr, err := tracing.Setup(t.Context(), c, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Fatalf("tracing is off with %+v", c)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// waitSpans waits until done holds of the collector's spans, flushing
// the providers meanwhile: the worker ends a run's span after it has
// replied, so the caller has its answer before the last spans are made.
func waitSpans(t *testing.T, col *otelcoltest.Collector, trs []tracing.Tracing, done func([]otelcoltest.Span) bool) ([]otelcoltest.Span, error) {
	t.Helper()
	return col.WaitFor(t.Context(), 15*time.Second, func(all []otelcoltest.Span) bool {
		if done(all) {
			return true
		}
		for _, tr := range trs {
			if f, ok := tr.Provider.(interface{ ForceFlush(context.Context) error }); ok {
				if err := f.ForceFlush(t.Context()); err != nil {
					t.Logf("flush: %v", err)
				}
			}
		}
		return false
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func inTrace(spans []otelcoltest.Span, traceID string) []otelcoltest.Span {
	return where(spans, func(s otelcoltest.Span) bool { return s.TraceID == traceID })
}

// where keeps the spans keep holds of, in order.
func where(spans []otelcoltest.Span, keep func(otelcoltest.Span) bool) []otelcoltest.Span {
	var out []otelcoltest.Span
	for _, s := range spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// byName maps each span's name to it; a name twice maps to nil, which the
// checks report as missing (one request makes one of each).
func byName(spans []otelcoltest.Span) map[string]*otelcoltest.Span {
	out := map[string]*otelcoltest.Span{}
	for i := range spans {
		if _, dup := out[spans[i].Name]; dup {
			out[spans[i].Name] = nil
			continue
		}
		out[spans[i].Name] = &spans[i]
	}
	return out
}

// checkTraceTree holds each span to its service, kind and parent.
func checkTraceTree(t *testing.T, got map[string]*otelcoltest.Span, caller string) {
	t.Helper()
	const server, publish, run = "POST /v1/chat/completions", "publish genq.jobs.B", "run job"
	want := []struct {
		name, service, parent string
		kind                  int
	}{
		{server, "genq-api", "", kindServer},
		{"decode request", "genq-api", server, kindInternal},
		{publish, "genq-api", server, kindProducer},
		{"queue wait", "genq-worker", publish, kindInternal},
		{run, "genq-worker", publish, kindConsumer},
		{"prepare", "genq-worker", run, kindInternal},
		{"prefill", "genq-worker", run, kindInternal},
		{"decode", "genq-worker", run, kindInternal},
		{"reply", "genq-worker", run, kindProducer},
	}
	for _, w := range want {
		s := got[w.name]
		if s == nil {
			t.Errorf("no single span %q in the trace (spans: %v)", w.name, keys(got))
			continue
		}
		parent := caller
		if w.parent != "" {
			if p := got[w.parent]; p != nil {
				parent = p.SpanID
			}
		}
		if s.Service != w.service || s.Kind != w.kind || s.ParentSpanID != parent {
			t.Errorf("span %q: service %s, kind %d, parent %s; want %s, %d, %s", w.name, s.Service, s.Kind, s.ParentSpanID, w.service, w.kind, parent)
		}
	}
	if s := got[server]; s != nil && (s.Attributes["http.route"] != "/v1/chat/completions" || s.Attributes["http.response.status_code"] != int64(200)) {
		t.Errorf("server span's attributes: %v", s.Attributes)
	}
	if s := got[run]; s != nil && (s.Attributes["genq.attempt"] != int64(1) || s.Attributes["genq.outcome"] != "ok" || s.Attributes["genq.class"] != "interactive") {
		t.Errorf("run span's attributes: %v", s.Attributes)
	}
}

// checkQueueWait holds the queue's wait to its own span: from the stream's
// timestamp, not before the publish began, to the pull, where the run
// begins.
func checkQueueWait(t *testing.T, got map[string]*otelcoltest.Span) {
	t.Helper()
	wait, publish, run := got["queue wait"], got["publish genq.jobs.B"], got["run job"]
	if wait == nil || publish == nil || run == nil {
		return
	}
	if wait.Start.Before(publish.Start) || wait.Start.After(publish.End) || wait.End.Before(wait.Start) || !wait.End.Equal(run.Start) {
		t.Errorf("queue wait %s–%s; publish %s–%s, run from %s", wait.Start, wait.End, publish.Start, publish.End, run.Start)
	}
}

// checkEngineSpans holds prefill and decode to the answer's usage, and to
// each other: decode starts where prefill ends, at the first token.
func checkEngineSpans(t *testing.T, got map[string]*otelcoltest.Span, promptTokens, completionTokens int) {
	t.Helper()
	prefill, decode := got["prefill"], got["decode"]
	if prefill == nil || decode == nil {
		return
	}
	if prefill.Attributes["genq.prompt_tokens"] != int64(promptTokens) || decode.Attributes["genq.completion_tokens"] != int64(completionTokens) {
		t.Errorf("prefill %v, decode %v; want %d prompt and %d answer tokens", prefill.Attributes, decode.Attributes, promptTokens, completionTokens)
	}
	if !prefill.End.Equal(decode.Start) || decode.End.Before(decode.Start) {
		t.Errorf("prefill ends %s, decode %s–%s", prefill.End, decode.Start, decode.End)
	}
}

func keys(m map[string]*otelcoltest.Span) []string {
	return slices.Collect(maps.Keys(m))
}

// TestTraceRedeliveries holds a job that fails on every attempt to one
// trace: each delivery a queue wait and a run of its own, under the same
// publish, with its attempt, the last one dead-lettered.
func TestTraceRedeliveries(t *testing.T) {
	col, s, api, wrk := tracedStack(t)
	s.runWorkerWith(newTestBackend(1), worker.Config{DrainGrace: time.Second, Tracing: wrk.Provider})
	s.waitLive(1)

	traceID := randomHex(16)
	resp := s.postTraced("/generate", `{"text":"fail:now"}`, traceID, randomHex(8), "")
	if resp.status != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500 after every attempt failed", resp.status)
	}
	attempts := s.settings.MaxAttempts
	spans, err := waitSpans(t, col, []tracing.Tracing{api, wrk}, func(all []otelcoltest.Span) bool {
		return len(named(inTrace(all, traceID), "run job")) == attempts
	})
	if err != nil {
		t.Fatal(err)
	}
	spans = inTrace(spans, traceID)
	publish := named(spans, "publish genq.jobs.B")
	if len(publish) != 1 {
		t.Fatalf("%d publish spans, want 1", len(publish))
	}
	waits, runs := named(spans, "queue wait"), named(spans, "run job")
	if len(waits) != attempts {
		t.Errorf("%d queue waits, want one per attempt (%d)", len(waits), attempts)
	}
	seen := map[int64]string{}
	for _, s := range append(waits, runs...) {
		if s.ParentSpanID != publish[0].SpanID {
			t.Errorf("%s of attempt %v is not under the publish", s.Name, s.Attributes["genq.attempt"])
		}
	}
	for _, r := range runs {
		seen[r.Attributes["genq.attempt"].(int64)] = fmt.Sprint(r.Attributes["genq.outcome"])
		if r.StatusCode != statusError {
			t.Errorf("run of attempt %v: status %d, want an error", r.Attributes["genq.attempt"], r.StatusCode)
		}
	}
	for a := 1; a <= attempts; a++ {
		want := "retried"
		if a == attempts {
			want = "dead_lettered"
		}
		if seen[int64(a)] != want {
			t.Errorf("attempt %d: outcome %q, want %q (all: %v)", a, seen[int64(a)], want, seen)
		}
	}
}

// statusError is OTLP's error status code.
const statusError = 2

func named(spans []otelcoltest.Span, name string) []otelcoltest.Span {
	return where(spans, func(s otelcoltest.Span) bool { return s.Name == name })
}

// TestTraceBatch holds each request of a batch to a trace of its own,
// rooted where the api queues it and linked to the request that created
// the batch, through to the worker's run on the batch lane.
func TestTraceBatch(t *testing.T) {
	col, s, api, wrk := tracedStack(t)
	s.tracedTextWorker(wrk)
	const lines = 3
	up := s.upload("in.jsonl", chatLines(lines, func(int) string { return `,"max_tokens":2` }), "batch")
	var file struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(up.body, &file); err != nil || up.status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	traceID := randomHex(16)
	b := decodeAs[batchObject](t, s.postTraced("/v1/batches",
		`{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, traceID, randomHex(8), ""))
	s.waitBatch(b.ID, func(b batchObject) bool { return b.Status == "completed" })

	batchRuns := func(all []otelcoltest.Span) []otelcoltest.Span {
		return where(named(all, "run job"), func(s otelcoltest.Span) bool { return s.Attributes["genq.class"] == "batch" })
	}
	spans, err := waitSpans(t, col, []tracing.Tracing{api, wrk}, func(all []otelcoltest.Span) bool {
		return len(batchRuns(all)) == lines && len(named(inTrace(all, traceID), "POST /v1/batches")) == 1
	})
	if err != nil {
		t.Fatal(err)
	}
	created := named(inTrace(spans, traceID), "POST /v1/batches")[0]
	seenLines := map[int64]bool{}
	for _, run := range batchRuns(spans) {
		if run.TraceID == traceID {
			t.Errorf("a batch request's run is in the creating request's trace")
		}
		got := byName(inTrace(spans, run.TraceID))
		root, publish := got["queue batch request"], got["publish genq.batch.B"]
		if root == nil || publish == nil {
			t.Errorf("trace %s: no single root and publish (spans: %v)", run.TraceID, keys(got))
			continue
		}
		if root.ParentSpanID != "" || publish.ParentSpanID != root.SpanID || run.ParentSpanID != publish.SpanID {
			t.Errorf("trace %s: root's parent %q, publish's %s (root %s), run's %s (publish %s)",
				run.TraceID, root.ParentSpanID, publish.ParentSpanID, root.SpanID, run.ParentSpanID, publish.SpanID)
		}
		if len(root.Links) != 1 || root.Links[0] != (otelcoltest.Link{TraceID: traceID, SpanID: created.SpanID}) {
			t.Errorf("root's links %v; want the creating request's span %s/%s", root.Links, traceID, created.SpanID)
		}
		if root.Attributes["genq.batch.id"] != b.ID {
			t.Errorf("root's attributes %v", root.Attributes)
		}
		line, _ := root.Attributes["genq.batch.line"].(int64)
		seenLines[line] = true
	}
	if len(seenLines) != lines {
		t.Errorf("lines traced: %v; want %d", seenLines, lines)
	}
}
