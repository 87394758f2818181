package natsqueue

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// A job's looks come at doubling gaps up to MaxGap, each jittered within
// lookJitter, the last one lookMargin before the deadline, none after.
func TestLateLookSchedule(t *testing.T) {
	looks := LateLooks{After: 5 * time.Second, MaxGap: 30 * time.Second, PerSecond: 1}
	tests := []struct {
		name     string
		deadline time.Duration // from the start; 0: none
		jitter   float64       // what the random source says, in [0, 1)
		want     []int         // the first gaps, in seconds
		ends     bool          // no look after them
	}{
		{"no deadline, no jitter", 0, 0.5, []int{5, 10, 20, 30, 30, 30}, false},
		{"no deadline, early", 0, 0, []int{4, 8, 16, 24, 24, 24}, false},
		{"no deadline, late", 0, 0.999999, []int{6, 12, 24, 36, 36, 36}, false},
		{"a minute's deadline", 60, 0.5, []int{5, 10, 20, 24}, true},
		{"deadline before the first look", 4, 0.5, []int{3}, true},
		{"deadline within the margin", 1, 0.5, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			l := &lateLook{looks: looks, gap: looks.After, jitter: func() float64 { return tt.jitter }}
			if tt.deadline > 0 {
				l.deadline = now.Add(tt.deadline * time.Second)
			}
			var got []int
			more := false
			for {
				d, ok := l.nextDue(now)
				if more = ok; !ok || len(got) == len(tt.want) {
					break
				}
				// A jitter just short of 1 gives gaps a few µs short.
				got = append(got, int(d.Round(time.Millisecond)/time.Millisecond))
				now = now.Add(d)
			}
			want := make([]int, len(tt.want))
			for i, w := range tt.want {
				want[i] = w * 1000
			}
			if !slices.Equal(got, want) || more == tt.ends {
				t.Fatalf("gaps %v ms, more to come %v; want %v ms, more %v", got, more, want, !tt.ends)
			}
		})
	}
}

// The pacer hands out slots gap apart from the first due look on, and a
// look due after a quiet spell goes at once.
func TestLookPacer(t *testing.T) {
	p := newLookPacer(20)
	now := time.Unix(1_000_000, 0)
	for i := range 5 {
		if at := p.reserve(now); !at.Equal(now.Add(time.Duration(i) * 50 * time.Millisecond)) {
			t.Fatalf("slot %d at %s after now; want %dms", i, at.Sub(now), 50*i)
		}
	}
	later := now.Add(time.Second)
	if at := p.reserve(later); !at.Equal(later) {
		t.Fatalf("after a quiet spell the slot is %s late; want none", at.Sub(later))
	}
	if newLookPacer(0) != nil {
		t.Fatal("a pacer for 0 looks a second; want none (looks off)")
	}
}

// fastLooks look soon and often, for tests: what the defaults do in
// seconds, these do in a fraction of one.
var fastLooks = LateLooks{After: 300 * time.Millisecond, MaxGap: time.Second, PerSecond: 50}

// A result stored whose reply never went out (its worker died between
// storing and replying again, or the reply was lost on its way while the
// caller stayed connected) reaches the caller well before its deadline,
// as the reply would have. A reply that comes afterwards finds nobody
// waiting. A result taken this way is deleted once read, unless the job
// asked for store; a stored error is left to its TTL, as one replied is.
func TestLateResultFoundInStore(t *testing.T) {
	tests := []struct {
		name     string
		store    bool
		status   string
		body     string
		wantCode genq.Code
		wantKept bool
	}{
		{"ok result", false, StatusOK, `{"generated_text":"HI"}`, "", false},
		{"ok result of a job with store", true, StatusOK, `{"generated_text":"HI"}`, "", true},
		{"error result", false, StatusErr, `{"code":"invalid","error":"the prompt is too long"}`, genq.Invalid, true},
	}
	s := newTestServer(t)
	c := s.dial()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newClient(t, c)
			cl.LookLate(fastLooks)
			job := testJob()
			job.Store = tt.store
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			got := runAsync(ctx, cl, job)
			waitPending(t, cl, job.ID)
			h := nats.Header{}
			h.Set(HeaderStatus, tt.status)
			if err := c.store(t.Context(), job, []byte(tt.body), h, storeFloor); err != nil {
				t.Fatal(err)
			}
			o := <-got
			took := time.Since(start)
			if genq.ErrorCode(o.err) != tt.wantCode || tt.wantCode == "" && (o.err != nil || string(o.body) != tt.body) {
				t.Fatalf("the caller got %q, %v; want %q, code %q", o.body, o.err, tt.body, tt.wantCode)
			}
			t.Logf("the stored result came after %s, of a 20s deadline", took)
			if answer := lateReply(t, c, cl, job.ID); answer != "gone" {
				t.Errorf("a reply after the look was answered %q; want gone (nobody waits)", answer)
			}
			_, err := c.FetchResult(t.Context(), job.ID)
			if kept := genq.ErrorCode(err) != genq.NotFound; kept != tt.wantKept {
				t.Errorf("result still stored: %v (%v); want %v", kept, err, tt.wantKept)
			}
		})
	}
}

// waitPending waits until cl's Run waits for job id's reply.
func waitPending(t *testing.T, cl *Client, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		cl.mu.Lock()
		_, waiting := cl.pending[id]
		cl.mu.Unlock()
		if waiting {
			return
		}
	}
	t.Fatalf("nobody waits for job %s", id)
}

// lateReply sends job id's reply as a worker does, as a request for a
// receipt, and returns the producer's answer.
func lateReply(t *testing.T, c *Conn, cl *Client, id string) string {
	t.Helper()
	m := &nats.Msg{Subject: cl.ReplySubject(id), Header: nats.Header{}, Data: []byte(`{"generated_text":"again"}`)}
	m.Header.Set(HeaderJobID, id)
	m.Header.Set(HeaderStatus, StatusOK)
	resp, err := c.nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		t.Fatalf("late reply: %v", err)
	}
	return string(resp.Data)
}

// However many jobs wait without a reply, their looks in the store stay
// within PerSecond. Every look takes a slot of the pacer, the first no
// earlier than the pacer's making and each next one 1/PerSecond later,
// and the server gets a look's request only after its slot: n requests
// counted from the pacer's making on took at least (n-1)/PerSecond,
// however late a busy machine fires their timers or delivers them. The
// bound is on that, not on a window's count (and there are looks: the
// bound is not met by looking never).
func TestLateLooksBounded(t *testing.T) {
	const (
		jobs      = 100
		perSecond = 20
		enough    = 40 // looks counted: two seconds' worth
	)
	s := newTestServer(t)
	c := s.dial()
	cl := newClient(t, c)

	var looks atomic.Int64
	monitor := s.dial()
	for _, subject := range []string{"$JS.API.DIRECT.GET.OBJ_" + ResultsBucket + ".>", "$JS.API.STREAM.MSG.GET.OBJ_" + ResultsBucket} {
		sub, err := monitor.nc.Subscribe(subject, func(*nats.Msg) { looks.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := monitor.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	paced := time.Now()
	// Unpaced, each job would look every 100 ms: 1000 looks a second.
	cl.LookLate(LateLooks{After: 50 * time.Millisecond, MaxGap: 100 * time.Millisecond, PerSecond: perSecond})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			_, err := cl.Run(ctx, testJob())
			if genq.ErrorCode(err) != genq.Canceled {
				t.Errorf("Run: %v; want cancelled at the test's end", err)
			}
		})
	}
	for deadline := time.Now().Add(20 * time.Second); looks.Load() < enough; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks in 20s for %d jobs waiting; want %d", looks.Load(), jobs, enough)
		}
	}
	n := looks.Load()
	elapsed := time.Since(paced) // after n was read: its looks' slots all came before
	cancel()
	wg.Wait()

	bound := int64(elapsed/(time.Second/perSecond)) + 1
	t.Logf("%d jobs waiting: %d looks in %s (bound %d)", jobs, n, elapsed.Round(time.Millisecond), bound)
	if n > bound {
		t.Errorf("%d looks in %s for %d jobs; want at most %d (%d a second)", n, elapsed, jobs, bound, perSecond)
	}
}

// A reply that comes while a look in the store is on its way is taken at
// once: a look waited on in line held every reply behind it for as long
// as the store took to answer (up to pollTimeout when its leader was
// gone: make chaos-cluster's "results store's leader killed").
func TestReplyNotHeldByAStoreLook(t *testing.T) {
	s := newTestServer(t)
	c := s.dial()
	cl := newClient(t, c)
	cl.LookLate(fastLooks)
	looking := make(chan struct{}, 1)
	cl.lookIn = func(ctx context.Context, _ genq.Job) (*genq.ReceivedResult, bool, error) {
		select {
		case looking <- struct{}{}:
		default:
		}
		<-ctx.Done() // a store that never answers
		return nil, false, nil
	}
	job := testJob()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		r, err := cl.Run(ctx, job)
		if err == nil {
			r.Body.Close()
		}
		got <- err
	}()
	select {
	case <-looking:
	case <-time.After(20 * time.Second):
		t.Fatal("no look in the store within 20s; want one after fastLooks.After")
	}
	lateReply(t, c, cl, job.ID)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Run: %v; want the reply", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reply was held behind a look in the store that never ends")
	}
}

// A look that failed because its caller's ctx ended finds nothing: the
// wait's own case for the ended ctx then answers with a timeout and
// cancels the job. Taken for the job's answer, the failure was returned
// as the store being unavailable, and the job ran on for nobody. The
// last look goes lookMargin before the deadline, so with a store slow to
// answer (its leader gone) a look is often on its way at the deadline.
func TestLookEndedWithItsCaller(t *testing.T) {
	s := newTestServer(t)
	cl := newClient(t, s.dial())
	for _, tt := range []struct {
		name string
		ctx  func() context.Context
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}},
		{"past its deadline", func() context.Context {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, found, err := cl.lookInStore(tt.ctx(), testJob())
			if found || r != nil || err != nil {
				t.Fatalf("look: %v, found %v, %v; want nothing found, so the ended ctx answers", r, found, err)
			}
		})
	}
}

// A job given its slot for a poll (a reconnect's sweep) while a late look
// of its is on its way polls at that slot, not before: the sweep's slots
// are what paces the polls after a reconnect. The look on its way gives
// way to the poll; had it come back to rearm the new schedule, the poll's
// first look went at the late looks' next gap, with no slot of the pacer.
func TestSweepSlotDuringALook(t *testing.T) {
	s := newTestServer(t)
	cl := newClient(t, s.dial())
	cl.LookLate(fastLooks)
	looks := make(chan time.Time, 8)
	release := make(chan struct{})
	var first atomic.Bool
	cl.lookIn = func(ctx context.Context, _ genq.Job) (*genq.ReceivedResult, bool, error) {
		looks <- time.Now()
		if !first.Swap(true) {
			select { // the late look, slow to come back
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil, false, nil
	}
	job := testJob()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.Run(ctx, job)
	}()
	defer func() { cancel(); <-done }()
	<-looks
	cl.mu.Lock()
	w := cl.pending[job.ID]
	cl.mu.Unlock()
	slot := time.Now().Add(2 * time.Second)
	w.slot <- slot
	// Taken: the wait handles the slot before the look's outcome.
	for len(w.slot) > 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	select {
	case at := <-looks:
		if at.Before(slot) {
			t.Fatalf("the poll looked %s before its slot", slot.Sub(at))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no poll within 15s of its slot's giving")
	}
}
