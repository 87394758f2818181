package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/worker"
)

// testLog writes logs only when the test fails or -v is given.
func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startNATS(t *testing.T, maxPayload int32) *server.Server {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func testSettings() natsqueue.Settings {
	s := natsqueue.DefaultSettings()
	s.AckWait = 2 * time.Second
	s.HeartbeatTTL = 3 * time.Second
	return s
}

func openConn(t *testing.T, ns *server.Server, s natsqueue.Settings, v ...genq.Variant) (*natsqueue.Conn, *nats.Conn) {
	return openConnAs(t, ns, s, natsqueue.ConnectOptions{}, v...)
}

// openConnAs is openConn with o's credentials.
func openConnAs(t *testing.T, ns *server.Server, s natsqueue.Settings, o natsqueue.ConnectOptions, v ...genq.Variant) (*natsqueue.Conn, *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o.URL = ns.ClientURL()
	conn, err := natsqueue.Dial(ctx, o, s, testLog(t), v...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn, conn.NATS()
}

type stack struct {
	t          *testing.T
	ns         *server.Server
	settings   natsqueue.Settings
	variant    genq.Variant
	api        *httptest.Server
	httpServer *httpapi.HTTPServer      // api's Config
	metrics    *httptest.Server         // the api's internal address
	conn       *natsqueue.Conn          // the api's
	natsAuth   natsqueue.ConnectOptions // every process's NATS credentials
	// key, when set, goes with do's and upload's requests as a bearer token.
	key string
}

type stackOptions struct {
	variant    genq.Variant
	maxPayload int32
	settings   *natsqueue.Settings
	http       httpapi.Config
	// ns, when set, is the NATS server to use, another stack's (an api
	// restarted, or a second one).
	ns *server.Server
	// keys and tenants: the api's keys with their tenants, GENQ_KEYS
	// watched, and its tenants' limits and usage in GENQ_TENANTS.
	tenants bool
	keys    []tenant.Key
	// log, when set, takes the api's log.
	log *slog.Logger
	// tracing makes the api's spans; natsAuth are the credentials every
	// process of the stack connects with.
	tracing  trace.TracerProvider
	natsAuth natsqueue.ConnectOptions
}

// newStack starts NATS and the api; workers are started separately.
func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	if o.variant == "" {
		o.variant = genq.VariantB
	}
	s := testSettings()
	if o.settings != nil {
		s = *o.settings
	}
	ns := o.ns
	if ns == nil {
		ns = startNATS(t, o.maxPayload)
	}
	queues := []genq.Variant{o.variant}
	if o.http.Catalog != nil {
		queues = o.http.Catalog.Queues()
	}
	conn, _ := openConnAs(t, ns, s, o.natsAuth, queues...)
	client, err := natsqueue.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fleet, err := conn.WatchAllWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	workers := fleet.Of(o.variant)
	// As cmd/api: jobs are routed to the workers of their model that take
	// routed jobs.
	client.RouteBy(natsqueue.NewRouter(fleet))
	cfg := o.http
	cfg.Variant = o.variant
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = 20 * time.Second
	}
	if cfg.WakeupEvery == 0 {
		cfg.WakeupEvery = 10 * time.Second
	}
	reg := prometheus.NewRegistry()
	store := natsqueue.NewJobStore(client)
	batches := store.NewBatchStore(natsqueue.FileStoreConfig{TTL: time.Hour})
	log := o.log
	if log == nil {
		log = testLog(t)
	}
	deps := httpapi.Deps{Jobs: store, Streamer: store, Async: store, Batches: batches, Background: t.Context(), Depths: conn, TenantQueues: conn,
		Workers: workers, Fleet: fleet, Waker: conn, Registry: reg, NewID: uuid.NewString, Log: log, Tracing: o.tracing}
	if o.tenants {
		deps.Keys, deps.Limiter = tenantDeps(t, ctx, conn, o.keys, log)
	}
	h := httpapi.NewServer(cfg, deps)
	api := httptest.NewUnstartedServer(h)
	hs := httpapi.NewHTTPServer(h, cfg)
	api.Config = hs.Server
	api.Start()
	t.Cleanup(api.Close)
	metrics := httptest.NewServer(httpapi.NewMetricsHandler(reg, conn, log))
	t.Cleanup(metrics.Close)
	return &stack{t: t, ns: ns, settings: s, variant: o.variant, api: api, httpServer: hs, metrics: metrics, conn: conn, natsAuth: o.natsAuth}
}

// runningWorker is a worker runtime in this process with its own NATS
// connection, so a test can cut it off as a crash would.
type runningWorker struct {
	nc      *nats.Conn
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run has returned
	err     error         // what Run returned
	backend *testBackend
}

func (s *stack) startWorker(b *testBackend, grace time.Duration) *runningWorker {
	s.t.Helper()
	w := s.runWorker(b, grace)
	w.backend = b
	return w
}

// runWorker runs a worker runtime over b until the test ends.
func (s *stack) runWorker(b genq.Backend, grace time.Duration) *runningWorker {
	return s.runWorkerWith(b, worker.Config{DrainGrace: grace})
}

// runWorkerWith is runWorker with cfg's settings over the tests' own.
func (s *stack) runWorkerWith(b genq.Backend, cfg worker.Config) *runningWorker {
	s.t.Helper()
	conn, nc := openConnAs(s.t, s.ns, s.settings, s.natsAuth, s.variant)
	ctx, cancel := context.WithCancel(context.Background())
	id := "w-" + uuid.NewString()[:8]
	cfg.WorkerID, cfg.Variant, cfg.PollWait = id, s.variant, 500*time.Millisecond
	cfg.HeartbeatEvery, cfg.RetryDelay = 500*time.Millisecond, 100*time.Millisecond
	rt := worker.New(cfg, conn, b, testLog(s.t).With("worker_id", id), prometheus.NewRegistry())
	w := &runningWorker{nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() { w.err = rt.Run(ctx); close(w.done) }()
	s.t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// crash cuts the worker off NATS without a word, as SIGKILL would.
func (w *runningWorker) crash() {
	w.nc.Close()
}

// waitLive waits until the api sees n live workers.
func (s *stack) waitLive(n int) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var root struct {
			LiveWorkers int `json:"live_workers"`
		}
		resp := s.get("/")
		_ = json.Unmarshal(resp.body, &root)
		if root.LiveWorkers == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("api never saw %d live workers", n)
}

type response struct {
	status  int
	header  http.Header
	trailer http.Header // read once the body is
	body    []byte
}

func (r response) errorText(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body is not JSON {error}: %q", r.body)
	}
	return e.Error
}

func (s *stack) do(ctx context.Context, method, path string, body []byte) (response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.api.URL+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (s *stack) get(path string) response {
	s.t.Helper()
	r, err := s.do(context.Background(), http.MethodGet, path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *stack) generate(text string) response {
	s.t.Helper()
	r, err := s.generateCtx(context.Background(), text)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *stack) generateCtx(ctx context.Context, text string) (response, error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	return s.do(ctx, http.MethodPost, "/generate", body)
}

// streamState is the state of the JetStream stream name, as the server
// reports it (zero when it has none).
func (s *stack) streamState(name string) server.StreamState {
	s.t.Helper()
	jsz, err := s.ns.Jsz(&server.JSzOptions{Streams: true, Accounts: true})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			if st.Name == name {
				return st.State
			}
		}
	}
	return server.StreamState{}
}

// streamMsgs counts the messages in the jobs stream.
func (s *stack) streamMsgs() uint64 { return s.streamState(natsqueue.JobsStream).Msgs }

// jobsPublished is the last sequence of the jobs stream: it grows with
// every job queued, run and acknowledged or not.
func (s *stack) jobsPublished() uint64 { return s.streamState(natsqueue.JobsStream).LastSeq }

func (s *stack) deadLetters() uint64 { return s.streamState(natsqueue.DeadStream).Msgs }

// testBackend stands in for a model. What it does is read from the prompt:
//
//	"echo:<s>"      answers <s> in upper case
//	"sleep:<ms>"    answers after ms milliseconds, or stops on cancel
//	"block"         runs until its context ends
//	"fail"          fails every time
//	"invalid"       refuses the job as one that can never succeed
//	"bytes:<n>"     answers n random bytes as image/png
type testBackend struct {
	slots  int
	device genq.Device

	calls     atomic.Int64
	started   chan string // job ids, as runs start
	mu        sync.Mutex
	ended     chan string // job ids whose context ended
	lastBytes []byte
}

func newTestBackend(slots int) *testBackend {
	return &testBackend{slots: slots, device: genq.Device{Kind: "cpu", Name: "test"},
		started: make(chan string, 100), ended: make(chan string, 100)}
}

func (b *testBackend) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: b.device, Model: "test-backend", Slots: b.slots}
}

func (b *testBackend) Close() error { return nil }

func (b *testBackend) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	b.calls.Add(1)
	b.started <- job.ID
	text := job.Text
	if text == "" {
		text = job.Prompt // a /v1 completion's
	}
	cmd, arg, _ := strings.Cut(text, ":")
	switch cmd {
	case "echo":
		return genq.NewTextResult(strings.ToUpper(arg)), nil
	case "sleep":
		ms, _ := strconv.Atoi(arg)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return genq.NewTextResult("slept " + arg), nil
		case <-ctx.Done():
			b.ended <- job.ID
			return genq.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
		}
	case "steps": // n steps of 200 ms, each reported, as an image's denoising
		n, _ := strconv.Atoi(arg)
		for step := range n {
			select {
			case <-time.After(200 * time.Millisecond):
				progress(genq.Progress{Done: step + 1, Total: n})
			case <-ctx.Done():
				return genq.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
			}
		}
		return genq.NewTextResult("stepped " + arg), nil
	case "block":
		<-ctx.Done()
		b.ended <- job.ID
		return genq.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
	case "fail":
		return genq.Result{}, errors.New("the model blew up")
	case "invalid":
		return genq.Result{}, genq.Errorf(genq.Invalid, "prompt too long for the context")
	case "bytes":
		n, _ := strconv.Atoi(arg)
		data := make([]byte, n)
		_, _ = rand.Read(data)
		b.mu.Lock()
		b.lastBytes = data
		b.mu.Unlock()
		return genq.NewImageResult(data), nil
	}
	return genq.Result{}, fmt.Errorf("test backend: unknown command %q", cmd)
}

func waitFor[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("timed out after %s waiting for %s", within, what)
		panic("unreachable")
	}
}
