package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// These tests take the server away while a settle is under way and bring
// it back: the settle's first try fails against a real nats-server, and a
// later one must land, once.

// dialWith is dial with the test's settings and its log.
func (s *testServer) dialWith(st Settings, log *slog.Logger) *Conn {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ConnectOptions{URL: s.ns.ClientURL()}, st, log, genq.VariantB)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(c.Close)
	return c
}

// settleSettings leave a settle room to retry: AckWait well above one
// try and the outage.
func settleSettings() Settings {
	st := DefaultSettings()
	st.AckWait = 10 * time.Second
	return st
}

// outage stops the server now and starts it again after d.
func (s *testServer) outage(d time.Duration) {
	s.stop()
	time.AfterFunc(d, s.start)
}

// pullOne publishes a job and pulls its delivery.
func pullOne(t *testing.T, c *Conn) *Delivery {
	t.Helper()
	job := testJob()
	if _, err := c.Publish(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Next(5 * time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v, %v", d, err)
	}
	if d.Job.ID != job.ID {
		t.Fatalf("pulled %s, want %s", d.Job.ID, job.ID)
	}
	return d
}

// waitFor polls cond until it holds or 15 s pass.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
	}
	t.Fatalf("%s: not within 15s", what)
}

// An ack whose first try goes unanswered is tried again until it lands:
// the job leaves the queue and is not delivered again, and the run record
// says it finished, for a redelivery had the ack never landed.
func TestAckRetriedThroughAnOutage(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dialWith(settleSettings(), testLog(t))
	d := pullOne(t, c)

	s.outage(settleTry + 500*time.Millisecond)
	start := time.Now()
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v; want it to land once the server is back", err)
	}
	if took := time.Since(start); took < settleTry {
		t.Errorf("Ack took %s: the first try cannot have been answered by a stopped server", took)
	}

	waitFor(t, "the consumer to hold nothing pending", func(ctx context.Context) bool {
		cons, err := c.js.Consumer(ctx, JobsStream, Interactive.Consumer(genq.VariantB))
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
	st, err := c.js.Stream(t.Context(), JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(t.Context()); err != nil || info.State.Msgs != 0 {
		t.Errorf("the queue holds %d messages (%v), want none: the ack removes the job", info.State.Msgs, err)
	}

	kv, err := c.attemptsKV(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), d.Job.ID)
	if err != nil {
		t.Fatalf("run record: %v; want one saying the job finished", err)
	}
	var r RunRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Finished != d.Job.Attempt || r.Seq != d.Seq {
		t.Errorf("run record %s (%v); want finished on delivery %d of seq %d", e.Value(), err, d.Job.Attempt, d.Seq)
	}
}

// A job failed for good (a Term) while the server is away is terminated
// once it is back: it leaves the queue and is not delivered again.
func TestTermRetriedThroughAnOutage(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dialWith(settleSettings(), testLog(t))
	d := pullOne(t, c)
	s.outage(settleTry + 500*time.Millisecond)
	if err := d.Fail(t.Context(), genq.Errorf(genq.Timeout, "too late"), ReplyMeta{}); err != nil {
		t.Fatalf("Fail: %v; want the term to land once the server is back", err)
	}
	waitFor(t, "the queue to be empty", func(ctx context.Context) bool {
		st, err := c.js.Stream(ctx, JobsStream)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

// An ack that lands at once leaves no run record: the common path never
// touches GENQ_ATTEMPTS.
func TestAckAtOnceWritesNoRecord(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dialWith(settleSettings(), testLog(t))
	d := pullOne(t, c)
	if err := d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	kv, err := c.attemptsKV(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(t.Context(), d.Job.ID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("run record: %v; want none", err)
	}
}

// A result whose first Put times out is put again, within the job's time,
// and is then in the store once.
func TestStoreRetriesAPutThatTimesOut(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	logs := &lockedBuffer{}
	c := s.dialWith(settleSettings(), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c.storeTry = 500 * time.Millisecond
	job := testJob()
	job.Deadline = time.Now().Add(20 * time.Second)
	h := nats.Header{}
	h.Set(HeaderStatus, StatusOK)
	h.Set(HeaderContentType, "application/json")

	s.outage(1500 * time.Millisecond)
	if err := c.store(t.Context(), job, []byte(`{"generated_text":"HI"}`), h, storeWithin(job, time.Now())); err != nil {
		t.Fatalf("store: %v; want it stored once the server is back", err)
	}
	if !strings.Contains(logs.String(), "result stored after retries") {
		t.Errorf("the first Put did not fail, so nothing was retried; log:\n%s", logs)
	}
	r, err := c.FetchResult(t.Context(), job.ID)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	defer r.Body.Close()
	var tr genq.TextResult
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil || tr.GeneratedText != "HI" {
		t.Errorf("stored %q (%v), want HI", tr.GeneratedText, err)
	}
}

// storeWithin gives a result the job's remaining time, and at least
// storeFloor however late the job is.
func TestStoreWithin(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name     string
		deadline time.Time
		want     time.Duration
	}{
		{"no deadline", time.Time{}, storeFloor},
		{"deadline passed", now.Add(-time.Minute), storeFloor},
		{"little time left", now.Add(time.Second), storeFloor},
		{"much time left", now.Add(time.Minute), time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := storeWithin(genq.Job{Envelope: genq.Envelope{Deadline: tt.deadline}}, now); got != tt.want {
				t.Errorf("storeWithin = %s, want %s", got, tt.want)
			}
		})
	}
}

// A cancel mark whose first write fails is written again until it lands;
// its withdrawal too.
func TestCancelMarkAndWithdrawalRetried(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dialWith(settleSettings(), testLog(t))
	id := testJob().ID
	markOf := func(ctx context.Context) (string, error) {
		e, err := c.cancels.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return string(e.Value()), nil
	}

	s.outage(settleTry + 500*time.Millisecond)
	c.Abandon(id)
	waitFor(t, "the abandon mark", func(ctx context.Context) bool {
		v, err := markOf(ctx)
		return err == nil && v == string(markAbandoned)
	})

	s.outage(settleTry + 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.Uncancel(ctx, id); err != nil {
		t.Fatalf("Uncancel: %v; want it withdrawn once the server is back", err)
	}
	if _, err := markOf(t.Context()); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the mark is still there (%v)", err)
	}
}

// A dead letter tried more than once is kept once: its message id is the
// job's stream sequence.
func TestDeadLetterRetriedKeptOnce(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dialWith(settleSettings(), testLog(t))
	d := pullOne(t, c)
	s.outage(settleTry + 500*time.Millisecond)
	if err := d.deadLetter(t.Context(), genq.Errorf(genq.Internal, "boom")); err != nil {
		t.Fatalf("dead letter: %v; want it written once the server is back", err)
	}
	if err := d.deadLetter(t.Context(), genq.Errorf(genq.Internal, "boom")); err != nil {
		t.Fatal(err)
	}
	st, err := c.js.Stream(t.Context(), DeadStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(t.Context()); err != nil || info.State.Msgs != 1 {
		t.Errorf("the dead-letter stream holds %d messages (%v), want 1", info.State.Msgs, err)
	}
}

// An abandoned job counts as cancelled whenever it was queued; a cancelled
// one only if queued before its mark.
func TestCancelWatchMarks(t *testing.T) {
	at := time.Now()
	tests := []struct {
		name   string
		mark   cancelMark
		queued time.Time
		want   bool
	}{
		{"cancelled after it was queued", cancelMark{at: at}, at.Add(-time.Second), true},
		{"cancelled before a rerun queued it", cancelMark{at: at}, at.Add(time.Second), false},
		{"abandoned, queued before", cancelMark{at: at, abandoned: true}, at.Add(-time.Second), true},
		{"abandoned, stored later by a server that froze", cancelMark{at: at, abandoned: true}, at.Add(20 * time.Second), true},
		{"abandoned past the TTL", cancelMark{at: at.Add(-2 * time.Hour), abandoned: true}, at, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &CancelWatch{cancelled: map[string]cancelMark{"j": tt.mark}, ttl: time.Hour}
			if got := w.IsCancelled("j", tt.queued); got != tt.want {
				t.Errorf("IsCancelled = %v, want %v", got, tt.want)
			}
		})
	}
}

// Liveness gives up a silent server within about half of AckWait, never
// sooner than minPing allows, and keeps the interval within its bounds.
func TestLiveness(t *testing.T) {
	for _, ackWait := range []time.Duration{time.Second, 3 * time.Second, 15 * time.Second, time.Minute, time.Hour} {
		interval, maxOut := Liveness(ackWait)
		if interval < minPing || interval > maxPing {
			t.Errorf("AckWait %s: interval %s outside [%s, %s]", ackWait, interval, minPing, maxPing)
		}
		notice := interval * time.Duration(maxOut+1)
		if interval < maxPing && notice > max(ackWait/2+ackWait/10, minPing*time.Duration(maxOut+1)) {
			t.Errorf("AckWait %s: a dead server is noticed after %s, past about half of AckWait", ackWait, notice)
		}
	}
}

// testLog is the connection's log: to the test's output when verbose.
func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
