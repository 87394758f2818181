package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsqueue"
)

func TestDuplicatePublishRunsOnce(t *testing.T) {
	s := newStack(t, stackOptions{})
	job := genq.Job{Envelope: genq.Envelope{ID: uuid.NewString(), Variant: s.variant, Text: "echo:once", Deadline: time.Now().Add(time.Minute), Store: true}}
	for i := range 2 {
		dup, err := s.conn.Publish(t.Context(), job)
		if err != nil || dup != (i == 1) {
			t.Fatalf("publish %d: duplicate %v, %v", i+1, dup, err)
		}
	}
	if n := s.streamMsgs(); n != 1 {
		t.Fatalf("stream holds %d messages after a duplicate publish, want 1", n)
	}
	b := newTestBackend(2)
	s.startWorker(b, time.Second)
	waitFor(t, b.started, 5*time.Second, "the job to start")
	reply := fetchStored(t, s.conn, job.ID)
	if !strings.Contains(reply, "ONCE") {
		t.Fatalf("stored result = %q", reply)
	}
	time.Sleep(500 * time.Millisecond)
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("backend ran %d times, want 1", n)
	}
}

// fetchStored waits for a stored result and returns its body.
func fetchStored(t *testing.T, c *natsqueue.Conn, id string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := c.FetchResult(t.Context(), id)
		if err == nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(r.Body)
			r.Body.Close()
			return buf.String()
		}
		if genq.ErrorCode(err) != genq.NotFound || time.Now().After(deadline) {
			t.Fatalf("fetch result: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCrashedWorkersJobFinishesElsewhere(t *testing.T) {
	s := newStack(t, stackOptions{})
	first := newTestBackend(1)
	w1 := s.startWorker(first, time.Second)

	type result struct {
		r   response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.generateCtx(context.Background(), "sleep:1500")
		done <- result{r, err}
	}()
	waitFor(t, first.started, 5*time.Second, "the first worker to start the job")
	w1.crash()

	second := newTestBackend(1)
	s.startWorker(second, time.Second)
	// AckWait is 2s in tests: the job comes back to the second worker then.
	waitFor(t, second.started, 10*time.Second, "the job to reach the second worker")
	res := waitFor(t, done, 10*time.Second, "the answer")
	if res.err != nil || res.r.status != http.StatusOK || !strings.Contains(string(res.r.body), "slept 1500") {
		t.Fatalf("answer = %v %d %s", res.err, res.r.status, res.r.body)
	}
	if n := second.calls.Load(); n != 1 {
		t.Fatalf("second worker ran the job %d times", n)
	}
}

func TestDeadlineGives504(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{JobTimeout: 700 * time.Millisecond}})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)

	start := time.Now()
	r := s.generate("sleep:5000")
	took := time.Since(start)
	if r.status != http.StatusGatewayTimeout || r.errorText(t) != "the job was not done by its deadline" {
		t.Fatalf("= %d %s", r.status, r.body)
	}
	if took > 3*time.Second {
		t.Fatalf("answered after %s, past the deadline", took)
	}
	// The worker's run is stopped too: its context ends at the deadline.
	waitFor(t, b.ended, 3*time.Second, "the backend to see its context end")
}

func TestDisconnectCancelsRunningJob(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = s.generateCtx(ctx, "block") }()
	id := waitFor(t, b.started, 5*time.Second, "the job to start")
	cancel()
	if ended := waitFor(t, b.ended, time.Second, "the running job to be cancelled"); ended != id {
		t.Fatalf("ended %s, want %s", ended, id)
	}
	// The slot is free: the next request runs at once.
	start := time.Now()
	if r := s.generate("echo:next"); r.status != http.StatusOK {
		t.Fatalf("next = %d %s", r.status, r.body)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the next request took %s", took)
	}
}

func TestDisconnectCancelsQueuedJob(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = s.generateCtx(ctx, "echo:never") }()
	deadline := time.Now().Add(5 * time.Second)
	for s.streamMsgs() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	time.Sleep(200 * time.Millisecond) // the cancel mark lands

	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	deadline = time.Now().Add(5 * time.Second)
	for s.streamMsgs() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.streamMsgs(); n != 0 {
		t.Fatalf("%d jobs left in the queue", n)
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("the cancelled job ran %d times", n)
	}
}

// TestDisconnectCancelsJobQueuedBehindBusyWorker: the cancel arrives while
// a live worker is busy, through its watch rather than the replay at start;
// the job is dropped when the slot frees, never run.
func TestDisconnectCancelsJobQueuedBehindBusyWorker(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	s.waitLive(1)

	busy := make(chan response, 1)
	go func() { busy <- s.generate("sleep:800") }()
	waitFor(t, b.started, 5*time.Second, "the first job to start")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = s.generateCtx(ctx, "echo:never") }()
	deadline := time.Now().Add(5 * time.Second)
	for s.streamMsgs() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if r := <-busy; r.status != http.StatusOK {
		t.Fatalf("the first job = %d %s", r.status, r.body)
	}
	deadline = time.Now().Add(5 * time.Second)
	for s.streamMsgs() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.streamMsgs(); n != 0 {
		t.Fatalf("%d jobs left in the queue", n)
	}
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("the backend ran %d jobs, want only the first", n)
	}
}

func TestFullQueueGives429(t *testing.T) {
	settings := testSettings()
	settings.QueueCapacity = 2
	s := newStack(t, stackOptions{settings: &settings, http: httpapi.Config{JobTimeout: 3 * time.Second}})
	// No worker: two requests fill the queue and wait.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); s.generate("echo:wait") }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.streamMsgs() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r := s.generate("echo:one too many")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("= %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r.errorText(t) != "the queue is full; retry later" {
		t.Fatalf("error = %q", r.errorText(t))
	}
	wg.Wait()
}

func TestRequestWaitsForAWorkerToStart(t *testing.T) {
	s := newStack(t, stackOptions{})
	done := make(chan response, 1)
	go func() { done <- s.generate("echo:late") }()
	time.Sleep(time.Second)
	select {
	case r := <-done:
		t.Fatalf("answered with no worker: %d %s", r.status, r.body)
	default:
	}
	s.startWorker(newTestBackend(1), time.Second)
	r := waitFor(t, done, 10*time.Second, "the answer")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "LATE") {
		t.Fatalf("= %d %s", r.status, r.body)
	}
}

func TestLargeResultThroughDefaultMaxPayload(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantC, maxPayload: 1 << 20})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	const size = 20 << 20
	r := s.generate("bytes:20971520")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("= %d %q", r.status, r.header.Get("Content-Type"))
	}
	b.mu.Lock()
	want := sha256.Sum256(b.lastBytes)
	b.mu.Unlock()
	if len(r.body) != size || sha256.Sum256(r.body) != want {
		t.Fatalf("got %d bytes, sha256 match %v", len(r.body), sha256.Sum256(r.body) == want)
	}
}

func TestFailingJobIsRetriedThenDeadLettered(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	r := s.generate("fail")
	if r.status != http.StatusInternalServerError {
		t.Fatalf("= %d %s", r.status, r.body)
	}
	if msg := r.errorText(t); !strings.Contains(msg, "generation failed after 3 attempts") {
		t.Fatalf("error = %q", msg)
	}
	if n := b.calls.Load(); n != 3 {
		t.Fatalf("ran %d times, want 3 attempts", n)
	}
	if n := s.deadLetters(); n != 1 {
		t.Fatalf("dead letters = %d, want 1", n)
	}
	// The queue keeps flowing.
	if r := s.generate("echo:after"); r.status != http.StatusOK {
		t.Fatalf("after a poison job = %d %s", r.status, r.body)
	}
}

func TestInvalidJobIsNotRetried(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	r := s.generate("invalid")
	if r.status != http.StatusBadRequest || r.errorText(t) != "prompt too long for the context" {
		t.Fatalf("= %d %s", r.status, r.body)
	}
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

func TestDrainFinishesJobsInFlight(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(2)
	w := s.startWorker(b, 10*time.Second)
	done := make(chan response, 1)
	go func() { done <- s.generate("sleep:800") }()
	waitFor(t, b.started, 5*time.Second, "the job to start")
	w.cancel() // SIGTERM
	r := waitFor(t, done, 5*time.Second, "the job in flight to finish")
	if r.status != http.StatusOK {
		t.Fatalf("= %d %s", r.status, r.body)
	}
	waitFor(t, w.done, 5*time.Second, "the worker to exit")
	if w.err != nil {
		t.Fatal(w.err)
	}
	// A drained worker takes nothing new; a new worker does.
	late := make(chan response, 1)
	go func() { late <- s.generate("echo:late") }()
	time.Sleep(300 * time.Millisecond)
	if b.calls.Load() != 1 {
		t.Fatalf("the drained worker ran %d jobs", b.calls.Load())
	}
	s.startWorker(newTestBackend(1), time.Second)
	if r := waitFor(t, late, 10*time.Second, "the late job"); r.status != http.StatusOK {
		t.Fatalf("late = %d", r.status)
	}
}

func TestDrainHandsBackJobsPastGrace(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	w := s.startWorker(b, 300*time.Millisecond)
	done := make(chan response, 1)
	go func() { done <- s.generate("sleep:2500") }()
	waitFor(t, b.started, 5*time.Second, "the job to start")
	w.cancel()
	waitFor(t, w.done, 5*time.Second, "the worker to exit")
	// Handed back at once, not after AckWait: the next worker starts it now.
	second := newTestBackend(1)
	start := time.Now()
	s.startWorker(second, time.Second)
	waitFor(t, second.started, 5*time.Second, "the handed-back job")
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("handed-back job restarted after %s", took)
	}
	if r := waitFor(t, done, 10*time.Second, "the answer"); r.status != http.StatusOK {
		t.Fatalf("= %d %s", r.status, r.body)
	}
}

// TestMetricsExposed reads the api's metrics on its internal address. The
// public address does not serve them, and a made-up method counts as
// "other", so clients cannot grow the label set.
func TestMetricsExposed(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.startWorker(newTestBackend(1), time.Second)
	s.generate("echo:m")
	s.get("/nope")
	for i := range 3 {
		if _, err := s.do(context.Background(), fmt.Sprintf("MADEUP%d", i), "/generate", nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := s.get("/metrics"); r.status != http.StatusNotFound {
		t.Fatalf("public /metrics = %d, want 404", r.status)
	}
	resp, err := http.Get(s.metrics.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`genq_http_requests_total{code="200",method="POST",route="/generate"} 1`,
		`genq_http_requests_total{code="404",method="GET",route="unmatched"} 2`,
		`genq_http_requests_total{code="405",method="other",route="unmatched"} 3`,
		`genq_generate_seconds_bucket{outcome="ok",le="600"} 1`,
		`genq_queue_wait_seconds_count 1`,
		`genq_live_workers`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(body), "MADEUP") {
		t.Error("a made-up method became a label value")
	}
}

// TestShutdownAbandonsWaitingRequestsCleanly: a request still waiting when
// the api's shutdown grace runs out gets 503, and its job is cancelled, so
// nothing runs for nobody.
func TestShutdownAbandonsWaitingRequestsCleanly(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	done := make(chan response, 1)
	go func() {
		r, err := s.generateCtx(context.Background(), "block")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	id := waitFor(t, b.started, 5*time.Second, "the job to start")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.httpServer.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown reports no request in flight")
	}
	r := waitFor(t, done, 5*time.Second, "the answer")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.errorText(t), "shutting down") {
		t.Fatalf("= %d %s, want 503 with Retry-After", r.status, r.body)
	}
	if ended := waitFor(t, b.ended, 2*time.Second, "the running job to be cancelled"); ended != id {
		t.Fatalf("ended %s, want %s", ended, id)
	}
}
