package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/worker"
)

// These tests hold the runtime to its rules over an in-process nats-server;
// a scripted Backend stands in for the model.

const variant = genq.VariantB

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// scripted is a Backend whose answer to each call is decided by the test.
type scripted struct {
	run func(ctx context.Context, job genq.Job, call int) (genq.Result, error)

	mu      sync.Mutex
	calls   map[string]int
	started chan string // a job id, as each call begins
}

func newScripted(run func(ctx context.Context, job genq.Job, call int) (genq.Result, error)) *scripted {
	return &scripted{run: run, calls: map[string]int{}, started: make(chan string, 16)}
}

func (b *scripted) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "scripted", Slots: 1}
}

func (b *scripted) Close() error { return nil }

func (b *scripted) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	b.mu.Lock()
	b.calls[job.ID]++
	call := b.calls[job.ID]
	b.mu.Unlock()
	b.started <- job.ID
	return b.run(ctx, job, call)
}

func (b *scripted) callsOf(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[id]
}

func echo(_ context.Context, job genq.Job, _ int) (genq.Result, error) {
	return genq.NewTextResult(strings.ToUpper(job.Text)), nil
}

// blockUntilDone runs until the job's context ends, as a model does.
func blockUntilDone(ctx context.Context, _ genq.Job, _ int) (genq.Result, error) {
	<-ctx.Done()
	return genq.Result{}, ctx.Err()
}

type harness struct {
	t      *testing.T
	url    string
	conn   *natsqueue.Conn // the producer's
	client *natsqueue.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	h := &harness{t: t, url: ns.ClientURL()}
	h.conn = h.dial()
	if h.client, err = natsqueue.NewClient(h.conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.client.Close() })
	return h
}

func (h *harness) dial() *natsqueue.Conn {
	h.t.Helper()
	s := natsqueue.DefaultSettings()
	s.AckWait = 2 * time.Second
	s.MaxAttempts = 3
	s.Memory = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: h.url}, s, testLog(), variant)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(conn.Close)
	return conn
}

// startWorker runs a runtime until the returned stop is called (or the test
// ends); stop returns once the runtime has drained.
func (h *harness) startWorker(id string, b genq.Backend, drainGrace time.Duration) (stop func()) {
	h.t.Helper()
	return h.startWorkerWith(id, b, func(*worker.Config) {}, drainGrace)
}

// startWorkerWith is startWorker with the settings tune changes.
func (h *harness) startWorkerWith(id string, b genq.Backend, tune func(*worker.Config), drainGrace time.Duration) (stop func()) {
	h.t.Helper()
	cfg := worker.Config{
		WorkerID: id, Variant: variant, PollWait: 200 * time.Millisecond,
		HeartbeatEvery: time.Second, DrainGrace: drainGrace, RetryDelay: 10 * time.Millisecond,
	}
	tune(&cfg)
	rt := worker.New(cfg, h.dial(), b, testLog().With("worker_id", id), prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("worker %s: %v", id, err)
			}
		})
	}
	h.t.Cleanup(stop)
	return stop
}

func newJob(text string, deadline time.Time) genq.Job {
	return genq.Job{Envelope: genq.Envelope{ID: uuid.NewString(), Variant: variant, Text: text, Deadline: deadline}}
}

// run queues job and waits up to 40 s for its answer.
func (h *harness) run(job genq.Job) (*genq.ReceivedResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	a, err := h.client.Run(ctx, job)
	if err == nil {
		defer a.Body.Close()
		body, _ := io.ReadAll(a.Body)
		a.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	return a, err
}

type result struct {
	a   *genq.ReceivedResult
	err error
}

// runAsync is run in the background, for a test that acts meanwhile.
func (h *harness) runAsync(job genq.Job) <-chan result {
	got := make(chan result, 1)
	go func() { a, err := h.run(job); got <- result{a, err} }()
	return got
}

// deadLetter returns the dead letter of job id, or nil.
func (h *harness) deadLetter(id string) *jetstream.RawStreamMsg {
	h.t.Helper()
	js, err := jetstream.New(h.conn.NATS())
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, natsqueue.DeadStream)
	if err != nil {
		h.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, natsqueue.DeadSubject(variant))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	if m.Header.Get(natsqueue.HeaderJobID) != id {
		return nil
	}
	return m
}

// TestJobFates runs one job through one worker for each rule of a job's
// life that ends in an answer to its caller.
func TestJobFates(t *testing.T) {
	errFlaky := errors.New("the GPU hiccuped")
	tests := []struct {
		name     string
		run      func(ctx context.Context, job genq.Job, call int) (genq.Result, error)
		deadline time.Duration // from now; the job's deadline
		// What the caller gets: an answer of the attempt, or an error.
		wantAttempt int
		wantCode    genq.Code
		wantMessage string
		wantCalls   int
		wantDead    bool
	}{
		{
			name: "done at once", run: echo, deadline: time.Minute,
			wantAttempt: 1, wantCalls: 1,
		},
		{
			name: "a failure is retried",
			run: func(ctx context.Context, job genq.Job, call int) (genq.Result, error) {
				if call == 1 {
					return genq.Result{}, errFlaky
				}
				return echo(ctx, job, call)
			},
			deadline:    time.Minute,
			wantAttempt: 2, wantCalls: 2,
		},
		{
			name: "a failure on every attempt is dead-lettered",
			run: func(context.Context, genq.Job, int) (genq.Result, error) {
				return genq.Result{}, errFlaky
			},
			deadline: time.Minute,
			wantCode: genq.Internal, wantMessage: "generation failed after 3 attempts", wantCalls: 3, wantDead: true,
		},
		{
			name: "a job the model refuses is not retried",
			run: func(context.Context, genq.Job, int) (genq.Result, error) {
				return genq.Result{}, genq.Errorf(genq.Invalid, "the prompt does not fit the context")
			},
			deadline: time.Minute,
			wantCode: genq.Invalid, wantMessage: "the prompt does not fit the context", wantCalls: 1,
		},
		{
			name: "a job expired in the queue never runs", run: echo, deadline: -time.Second,
			wantCode: genq.Timeout, wantMessage: "not started before its deadline", wantCalls: 0,
		},
		{
			name: "a job still running at its deadline is stopped", run: blockUntilDone, deadline: 500 * time.Millisecond,
			wantCode: genq.Timeout, wantMessage: "not done by its deadline", wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			b := newScripted(tt.run)
			h.startWorker("w1", b, time.Second)
			job := newJob("hello", time.Now().Add(tt.deadline))

			a, err := h.run(job)

			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				body, _ := io.ReadAll(a.Body)
				if want := `{"generated_text":"HELLO"}`; string(body) != want || a.Attempt != tt.wantAttempt || a.Worker != "w1" {
					t.Errorf("answer %s from attempt %d of %q, want %s from attempt %d of w1", body, a.Attempt, a.Worker, want, tt.wantAttempt)
				}
			} else if genq.ErrorCode(err) != tt.wantCode || !strings.Contains(genq.ErrorMessage(err), tt.wantMessage) {
				t.Errorf("Run: %v, want code %s and a message with %q", err, tt.wantCode, tt.wantMessage)
			}
			if got := b.callsOf(job.ID); got != tt.wantCalls {
				t.Errorf("the model ran the job %d times, want %d", got, tt.wantCalls)
			}
			if dead := h.deadLetter(job.ID) != nil; dead != tt.wantDead {
				t.Errorf("dead-lettered: %v, want %v", dead, tt.wantDead)
			}
		})
	}
}

// TestMalformedJobIsDeadLettered: a message no worker can read is kept in
// the dead-letter stream, never run, and does not stop the worker.
func TestMalformedJobIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	b := newScripted(echo)
	h.startWorker("w1", b, time.Second)
	js, err := jetstream.New(h.conn.NATS())
	if err != nil {
		t.Fatal(err)
	}
	const badID = "not a valid id"
	if _, err := js.Publish(t.Context(), natsqueue.JobsSubject(variant), []byte(`{"id":"`+badID+`","variant":"B","text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run(newJob("after", time.Now().Add(time.Minute))); err != nil {
		t.Fatalf("the job after the malformed one: %v", err)
	}
	if h.deadLetter(badID) == nil {
		t.Error("the malformed job is not in the dead-letter stream")
	}
	// A producer is told why, not only that the message is malformed.
	bad := newJob("x", time.Now().Add(time.Minute))
	bad.Variant = genq.VariantA
	bad.ReplyTo = h.client.ReplySubject(bad.ID)
	data, _ := json.Marshal(bad)
	sub, err := h.conn.NATS().SubscribeSync(bad.ReplyTo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), natsqueue.JobsSubject(variant), data); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `for variant \"A\"`) {
		t.Errorf("reply %s does not say what is wrong", m.Data)
	}
	if n := b.callsOf(badID); n != 0 {
		t.Errorf("the model ran the malformed job %d times", n)
	}
}

// TestCancelledBeforeStart: a job its caller cancelled while it was queued
// is dropped by the worker that pulls it, and its outcome, canceled, is
// stored; a mark older than the job (left by an earlier run of a batch
// that reuses its ids) does not stop it, and neither does one withdrawn.
func TestCancelledBeforeStart(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(h *harness, job genq.Job)
		wantRun bool
	}{
		{"cancelled after it was queued", func(h *harness, job genq.Job) {
			h.publish(job)
			h.conn.Cancel(job.ID)
		}, false},
		{"a mark older than the job", func(h *harness, job genq.Job) {
			h.conn.Cancel(job.ID)
			time.Sleep(10 * time.Millisecond)
			h.publish(job)
		}, true},
		{"abandoned before a frozen server stored it", func(h *harness, job genq.Job) {
			h.conn.Abandon(job.ID)
			time.Sleep(10 * time.Millisecond)
			h.publish(job)
		}, false},
		{"a withdrawn mark", func(h *harness, job genq.Job) {
			h.publish(job)
			h.conn.Cancel(job.ID)
			if err := h.conn.Uncancel(t.Context(), job.ID); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			job := newJob("maybe", time.Now().Add(time.Minute))
			tt.prepare(h, job)
			b := newScripted(echo)
			h.startWorker("w1", b, time.Second) // one slot: it pulls in queue order
			if _, err := h.run(newJob("after", time.Now().Add(time.Minute))); err != nil {
				t.Fatalf("the job queued after it: %v", err)
			}
			if ran := b.callsOf(job.ID) == 1; ran != tt.wantRun {
				t.Errorf("the model ran it: %v, want %v", ran, tt.wantRun)
			}
			_, err := h.conn.FetchResult(t.Context(), job.ID)
			if !tt.wantRun && genq.ErrorCode(err) != genq.Canceled {
				t.Errorf("stored outcome: %v, want canceled", err)
			}
			if h.deadLetter(job.ID) != nil {
				t.Error("a cancelled job was dead-lettered")
			}
		})
	}
}

// A job whose result was delivered but whose ack went unconfirmed (its
// run record says it finished) is acked on its next delivery without
// running it again.
func TestFinishedJobIsNotRunAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	job := newJob("once", time.Now().Add(time.Minute))
	h.publish(job)
	p, err := h.conn.NewPuller(t.Context(), variant)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Next(5 * time.Second)
	if err != nil || d == nil || d.Job.ID != job.ID {
		t.Fatalf("pull: %v, %v", d, err)
	}
	// What Ack writes when its first try goes unanswered; the ack itself
	// is never sent, so the job comes back after AckWait.
	if err := d.PutRecord(t.Context(), natsqueue.RunRecord{Finished: d.Job.Attempt}); err != nil {
		t.Fatal(err)
	}
	b := newScripted(echo)
	h.startWorker("w1", b, time.Second)
	js, err := jetstream.New(h.conn.NATS())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		info, err := js.Stream(t.Context(), natsqueue.JobsStream)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := info.Info(t.Context()); err == nil && st.State.Msgs == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the finished job was not acked on its redelivery")
		}
	}
	if n := b.callsOf(job.ID); n != 0 {
		t.Errorf("the model ran the finished job %d times, want 0", n)
	}
	if h.deadLetter(job.ID) != nil {
		t.Error("the finished job was dead-lettered")
	}
}

func (h *harness) publish(job genq.Job) {
	h.t.Helper()
	if _, err := h.conn.Publish(h.t.Context(), job); err != nil {
		h.t.Fatal(err)
	}
}

// TestDrain: a stopping worker lets the job in flight finish within its
// grace period, and hands back one that would not, for another worker.
func TestDrain(t *testing.T) {
	t.Run("finishes within the grace period", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		release := make(chan struct{})
		b := newScripted(func(ctx context.Context, job genq.Job, call int) (genq.Result, error) {
			<-release
			return echo(ctx, job, call)
		})
		stop := h.startWorker("w1", b, 10*time.Second)
		job := newJob("hello", time.Now().Add(time.Minute))
		got := h.runAsync(job)
		<-b.started
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		time.Sleep(300 * time.Millisecond) // the worker is draining now
		close(release)
		r := <-got
		<-stopped
		if r.err != nil || r.a.Attempt != 1 || r.a.Worker != "w1" {
			t.Fatalf("Run: %+v, %v; want the first attempt answered by the draining worker", r.a, r.err)
		}
	})
	t.Run("hands back what outlasts the grace period", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		b := newScripted(blockUntilDone)
		stop := h.startWorker("w1", b, 300*time.Millisecond)
		job := newJob("hello", time.Now().Add(time.Minute))
		got := h.runAsync(job)
		<-b.started
		start := time.Now()
		stop()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the drain took %s with a grace of 300ms", d)
		}
		h.startWorker("w2", newScripted(echo), time.Second)
		r := <-got
		if r.err != nil || r.a.Worker != "w2" || r.a.Attempt != 2 {
			t.Fatalf("Run: %+v, %v; want the second attempt answered by w2", r.a, r.err)
		}
		if h.deadLetter(job.ID) != nil {
			t.Error("a handed-back job was dead-lettered")
		}
	})
}

// TestSettledAfterTheGracePeriod: a job whose run ends only after the drain
// grace period (a backend slow to notice its context) is still answered and
// acked once: the ack does not inherit the ended context, so the job is not
// run a second time.
func TestSettledAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	b := newScripted(func(ctx context.Context, job genq.Job, call int) (genq.Result, error) {
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond) // the model finishes its step first
		return echo(ctx, job, call)
	})
	stop := h.startWorker("w1", b, 300*time.Millisecond)
	job := newJob("hello", time.Now().Add(time.Minute))
	got := h.runAsync(job)
	<-b.started
	stop()
	r := <-got
	if r.err != nil || r.a.Worker != "w1" {
		t.Fatalf("Run: %+v, %v; want the answer of w1", r.a, r.err)
	}
	h.startWorker("w2", b, time.Second)
	time.Sleep(3 * time.Second) // past the ack wait of 2 s
	if n := b.callsOf(job.ID); n != 1 {
		t.Errorf("the model ran the job %d times, want 1", n)
	}
}

// stepping is a backend whose job takes steps, saying how far it has got
// after each, and waits for the test before each and before it ends.
type stepping struct {
	steps int
	next  chan struct{} // one receive a step
}

func (b *stepping) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "stepping", Slots: 1}
}

func (b *stepping) Close() error { return nil }

func (b *stepping) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	for step := range b.steps {
		select {
		case <-b.next:
		case <-ctx.Done():
			return genq.Result{}, ctx.Err()
		}
		progress(genq.Progress{Done: step + 1, Total: b.steps})
	}
	// One more receive before the end: the run's last progress is looked
	// at while it still runs.
	select {
	case <-b.next:
	case <-ctx.Done():
		return genq.Result{}, ctx.Err()
	}
	return genq.NewTextResult("done"), nil
}

// TestStoredJobShowsItsProgress: a stored job's running mark carries how
// far its backend has got, as GET /v1/jobs/{id} reads it, step by step
// (written at most every half second).
func TestStoredJobShowsItsProgress(t *testing.T) {
	h := newHarness(t)
	b := &stepping{steps: 3, next: make(chan struct{})}
	h.startWorker("w1", b, time.Second)
	store := natsqueue.NewJobStore(h.client)
	job := newJob("count", time.Now().Add(30*time.Second))
	job.Store = true
	if err := store.PutJobRecord(t.Context(), job.ID, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	got := h.runAsync(job)
	for done := 1; done <= b.steps; done++ {
		b.next <- struct{}{}
		var p genq.Progress
		for end := time.Now().Add(5 * time.Second); p.Done < done && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			running, progress, err := store.Running(t.Context(), job.ID)
			if err != nil || !running {
				t.Fatalf("running %v, %v", running, err)
			}
			p = progress
		}
		if p != (genq.Progress{Done: done, Total: b.steps}) {
			t.Fatalf("after step %d the mark says %+v", done, p)
		}
	}
	b.next <- struct{}{}
	if r := <-got; r.err != nil {
		t.Fatal(r.err)
	}
}
