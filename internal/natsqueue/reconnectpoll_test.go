package natsqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/test/localstack"
)

// These tests cut the client's link to its server (through a localstack
// Proxy) while jobs wait, so that it reconnects and its jobs poll the
// results store; the server and its other connections stay up to count.

// pollLooks turn the late looks off, so that every look in the store is a
// poll; unpaced, the polls of the tests' jobs would go every 500 ms each.
func pollLooks(perSecond float64) LateLooks {
	return LateLooks{PollsPerSecond: perSecond}
}

// dialThroughProxy dials s's server through a Proxy, for a client whose
// link a test can cut.
func dialThroughProxy(t *testing.T, s *testServer) (*Conn, *localstack.Proxy) {
	t.Helper()
	proxy, err := localstack.NewProxy(s.ns.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ConnectOptions{URL: proxy.URL()}, DefaultSettings(), testLog(t), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, proxy
}

// storeLooks records, in order, the requests the server gets for the
// results store's records, each as what names the job it is for.
type storeLooks struct {
	mu     sync.Mutex
	on     bool
	looked []string
}

// watch subscribes c to the requests a look in the results store makes.
func (l *storeLooks) watch(t *testing.T, c *Conn) {
	t.Helper()
	for _, subject := range []string{"$JS.API.DIRECT.GET.OBJ_" + ResultsBucket + ".>", "$JS.API.STREAM.MSG.GET.OBJ_" + ResultsBucket} {
		sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.on {
				// A direct get names the record in its subject, the
				// other kind in its body.
				l.looked = append(l.looked, m.Subject+" "+string(m.Data))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// count turns the recording on or off and returns what it holds.
func (l *storeLooks) count(on bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = on
	return append([]string(nil), l.looked...)
}

// waitReconnected waits until c has reconnected n times.
func waitReconnected(t *testing.T, c *Conn, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.nc.Stats().Reconnects < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect %d within 10s", n)
		}
	}
}

// However many jobs wait when the client reconnects, their polls of the
// store stay within PollsPerSecond, counted at the server from the cut
// on, until every job has looked once.
func TestPollsAfterReconnectBounded(t *testing.T) {
	const (
		jobs      = 200
		perSecond = 100
	)
	s := newTestServer(t)
	var looks storeLooks
	looks.watch(t, s.dial())
	c, proxy := dialThroughProxy(t, s)
	cl := newClient(t, c)
	cl.LookLate(pollLooks(perSecond))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	var wg sync.WaitGroup
	ids := make([]string, jobs)
	for i := range ids {
		job := testJob()
		ids[i] = job.ID
		wg.Go(func() {
			_, err := cl.Run(ctx, job)
			if genq.ErrorCode(err) != genq.Canceled {
				t.Errorf("Run: %v; want cancelled at the test's end", err)
			}
		})
	}
	for _, id := range ids {
		waitPending(t, cl, id)
	}

	looks.count(true)
	start := time.Now()
	proxy.Cut()
	waitReconnected(t, c, 1)
	// Every job looks once, however slow this machine is today: the
	// verdict is on how many looks that took, not on when they came.
	got := looks.count(true)
	for deadline := time.Now().Add(20 * time.Second); distinct(got) < jobs; got = looks.count(true) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs looked in the store within 20s of the cut", distinct(got), jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got = looks.count(false)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()

	// One slot per 1/perSecond from the first, and a few whose requests
	// were on their way as the counting ended. Unpaced, every job would
	// look at once, then every 500 ms.
	bound := int(elapsed.Seconds()*perSecond) + 1 + 5
	t.Logf("%d jobs waiting: %d looks in %s after the cut (bound %d)", jobs, len(got), elapsed.Round(time.Millisecond), bound)
	if len(got) > bound {
		t.Errorf("%d looks in %s for %d jobs; want at most %d (%d a second)", len(got), elapsed, jobs, bound, perSecond)
	}
	// The slots are reserved in turns (Client.sweep), but a look's timer
	// may fire late on a busy machine, so the order is reported, not
	// judged.
	seen := make(map[string]bool, jobs)
	n := 0
	for ; n < len(got) && len(seen) < jobs; n++ {
		seen[got[n]] = true
	}
	t.Logf("every job looked once within the first %d looks", n)
}

// distinct is how many records looks names.
func distinct(looks []string) int {
	seen := make(map[string]bool, len(looks))
	for _, l := range looks {
		seen[l] = true
	}
	return len(seen)
}

// A job whose result is stored, and its reply lost, while the client is
// away is answered from the store once the client reconnects, though
// its late looks are off and no reply comes.
func TestResultStoredWhileAwayFoundAfterReconnect(t *testing.T) {
	s := newTestServer(t)
	worker := s.dial()
	c, proxy := dialThroughProxy(t, s)
	cl := newClient(t, c)
	cl.LookLate(pollLooks(DefaultLateLooks().PollsPerSecond))

	job := testJob()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := runAsync(ctx, cl, job)
	waitPending(t, cl, job.ID)

	proxy.Freeze()
	h := nats.Header{}
	h.Set(HeaderStatus, StatusOK)
	const body = `{"generated_text":"HI"}`
	if err := worker.store(t.Context(), job, []byte(body), h, storeFloor); err != nil {
		t.Fatal(err)
	}
	// The reply goes into the frozen link, and is gone with it.
	m := &nats.Msg{Subject: cl.ReplySubject(job.ID), Header: h, Data: []byte(body)}
	m.Header.Set(HeaderJobID, job.ID)
	if err := worker.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	proxy.Cut()

	o := <-got
	if o.err != nil || string(o.body) != body {
		t.Fatalf("the caller got %q, %v; want %q", o.body, o.err, body)
	}
	t.Logf("the stored result came %s after the cut, of a 20s deadline", time.Since(cut))
}

// A job queued after the client reconnected polls nothing for that
// reconnect: its reply cannot have been lost while the client was away.
// The sweep runs on a waiting job's check, so a reconnect while none
// waited was swept at the next job's, which then polled for nothing.
func TestJobAfterReconnectDoesNotPoll(t *testing.T) {
	s := newTestServer(t)
	c, proxy := dialThroughProxy(t, s)
	cl := newClient(t, c)
	cl.LookLate(pollLooks(DefaultLateLooks().PollsPerSecond))
	var looks atomic.Int64
	cl.lookIn = func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, bool, error) {
		looks.Add(1)
		return cl.lookInStore(ctx, job)
	}
	proxy.Cut()
	waitReconnected(t, c, 1)

	// Several of the job's checks of the reconnects (reconnectCheck).
	ctx, cancel := context.WithTimeout(t.Context(), 4*reconnectCheck)
	defer cancel()
	if _, err := cl.Run(ctx, testJob()); genq.ErrorCode(err) != genq.Timeout {
		t.Fatalf("Run: %v; want a timeout (no worker)", err)
	}
	if n := looks.Load(); n != 0 {
		t.Errorf("a job queued after the reconnect looked in the store %d times; want none", n)
	}
}
