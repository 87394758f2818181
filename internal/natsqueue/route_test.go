package natsqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// heartbeats is a set of live workers the test controls: what WorkerSet
// reads from GENQ_WORKERS, without waiting on heartbeat intervals.
type heartbeats struct {
	mu   sync.Mutex
	live []genq.Heartbeat
}

func (h *heartbeats) Live() []genq.Heartbeat {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]genq.Heartbeat(nil), h.live...)
}

func (h *heartbeats) set(hbs ...genq.Heartbeat) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = hbs
}

func routedBeat(id string, slots int) genq.Heartbeat {
	return genq.Heartbeat{WorkerID: id, Variant: genq.VariantB, Slots: slots, FreeSlots: slots, Routed: true}
}

func chatJob(conversation int) genq.Job {
	j := testJob()
	j.Text = ""
	j.Messages = []genq.Message{{Role: genq.RoleUser, Content: fmt.Sprintf("conversation %d", conversation)}}
	return j
}

// TestRouterChoice: each key goes to one worker, the keys spread over the
// workers, a worker that leaves moves only its own keys, a worker past its
// bounded share gives way to the next in rank, and a worker full of this
// producer's routed jobs, one that takes no routed jobs, a job with no
// key and any job while a single worker takes routed jobs all go to the
// shared subject.
func TestRouterChoice(t *testing.T) {
	hbs := &heartbeats{}
	hbs.set(routedBeat("w1", 64), routedBeat("w2", 64), routedBeat("w3.host", 64), genq.Heartbeat{WorkerID: "old", Variant: genq.VariantB, Slots: 64})
	r := NewRouter(hbs)
	first := map[int]string{}
	per := map[string]int{}
	for i := range 300 {
		s1, done1 := r.route(chatJob(i))
		done1()
		s2, done2 := r.route(chatJob(i))
		done2()
		if s1 == "" || s1 != s2 {
			t.Fatalf("conversation %d routed to %q then %q", i, s1, s2)
		}
		first[i] = s1
		per[s1]++
	}
	if len(per) != 3 || per[RoutedSubject(genq.VariantB, "old")] != 0 {
		t.Fatalf("spread over %v, want the three routed workers", per)
	}
	for s, n := range per {
		if n < 50 {
			t.Fatalf("%s got %d of 300 conversations", s, n)
		}
	}
	hbs.set(routedBeat("w1", 64), routedBeat("w3.host", 64))
	gone := RoutedSubject(genq.VariantB, "w2")
	for i, was := range first {
		now, done := r.route(chatJob(i))
		done()
		if was != gone && now != was {
			t.Fatalf("conversation %d moved from %s to %s when another worker left", i, was, now)
		}
		if now == gone {
			t.Fatalf("conversation %d still routed to the gone worker", i)
		}
	}

	// A worker full of this producer's routed jobs gives way to the next
	// in rank; with both full, jobs go to the shared subject.
	hbs.set(routedBeat("w1", 2), routedBeat("w2", 1))
	conv := 0
	for ; ; conv++ {
		s, done := r.route(chatJob(conv))
		done()
		if s == RoutedSubject(genq.VariantB, "w1") {
			break
		}
	}
	var dones []func()
	for range 2 {
		s, done := r.route(chatJob(conv))
		if s != RoutedSubject(genq.VariantB, "w1") {
			t.Fatalf("routed to %q with a free slot", s)
		}
		dones = append(dones, done)
	}
	s, toW2 := r.route(chatJob(conv))
	if s != RoutedSubject(genq.VariantB, "w2") {
		t.Fatalf("routed to %q past the first worker's slots, want the second", s)
	}
	if s, _ := r.route(chatJob(conv)); s != "" {
		t.Fatalf("routed to %q past both workers' slots", s)
	}
	toW2()
	dones[0]()
	dones[0]() // twice counts once
	if s, done := r.route(chatJob(conv)); s != RoutedSubject(genq.VariantB, "w1") {
		t.Fatalf("routed to %q once a routed job ended, want the first worker", s)
	} else {
		done()
	}
	dones[1]()
	// Bounded loads: one conversation's jobs all at once, on two workers,
	// spill to the second in rank past 1.25 times an even share.
	hbs.set(routedBeat("w1", 64), routedBeat("w2", 64))
	per = map[string]int{}
	for range 8 {
		s, _ := r.route(chatJob(7))
		per[s]++
	}
	if len(per) != 2 || per[RoutedSubject(genq.VariantB, "w1")] > 5 || per[RoutedSubject(genq.VariantB, "w2")] > 5 {
		t.Fatalf("8 jobs at once over 2 workers: %v, want at most 5 on each", per)
	}
	if s, _ := r.route(genq.Job{Envelope: genq.Envelope{ID: "x", Variant: genq.VariantB}}); s != "" {
		t.Fatalf("a job with no key routed to %q", s)
	}
	hbs.set(routedBeat("w1", 64), genq.Heartbeat{WorkerID: "old", Variant: genq.VariantB, Slots: 64})
	if s, _ := r.route(chatJob(1)); s != "" {
		t.Fatalf("routed to %q with one worker taking routed jobs", s)
	}
}

// TestWorkerToken: any worker id makes one valid subject token, and ids
// that differ stay apart.
func TestWorkerToken(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"w1", "ip-10-0-0-5.ec2.internal", "ip-10-0-0-5_ec2_internal", "a b", "a*b", "a>b", "", string(make([]byte, 300))} {
		tok := workerToken(id)
		if tok == "" || len(tok) > maxWorkerToken {
			t.Fatalf("token %q of %q", tok, id)
		}
		for _, r := range tok {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				t.Fatalf("token %q of %q holds %q", tok, id, r)
			}
		}
		if other, ok := seen[tok]; ok {
			t.Fatalf("%q and %q share token %q", id, other, tok)
		}
		seen[tok] = id
	}
}

// routedWorker is one worker's puller over a real nats-server.
func routedWorker(t *testing.T, c *Conn, id string, hbs *heartbeats) *Puller {
	t.Helper()
	p, err := c.NewRoutedPuller(t.Context(), genq.VariantB, RouteOptions{WorkerID: id, Workers: hbs, StealAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// publishRouted queues job as the api does with routing on.
func publishRouted(t *testing.T, c *Conn, r *Router, job genq.Job) string {
	t.Helper()
	subject, done := r.route(job)
	defer done()
	if _, err := c.publish(t.Context(), job, Interactive, subject, pubAckWait, publishGiveUp, false); err != nil {
		t.Fatal(err)
	}
	return subject
}

// next pulls one delivery within wait and checks it is job's, from source.
func next(t *testing.T, p *Puller, job genq.Job, from Source) *Delivery {
	t.Helper()
	d, err := p.Next(5 * time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v, %v", d, err)
	}
	if d.Job.ID != job.ID || d.Source != from {
		t.Fatalf("pulled %s from %s, want %s from %s", d.Job.ID, d.Source, job.ID, from)
	}
	return d
}

// TestRoutedDelivery over a real nats-server: a routed job goes to its
// worker's own consumer; a live owner that does not pull it in time, a
// gone owner, and a subject whose consumer was removed all let another
// worker take it, once; a gone owner's empty consumer is swept.
func TestRoutedDelivery(t *testing.T) {
	s := newTestServer(t)
	st := DefaultSettings()
	st.AckWait = 2 * time.Second
	st.HeartbeatTTL = time.Second // a gone worker's consumer is swept a second after it was seen gone
	c := s.dialWith(st, testLog(t))
	hbs := &heartbeats{}
	hbs.set(routedBeat("w1", 1), routedBeat("w2", 1))
	w1 := routedWorker(t, c, "w1", hbs)
	w2 := routedWorker(t, c, "w2", hbs)
	r := NewRouter(hbs)

	// A conversation routed to w1.
	var job genq.Job
	for i := 0; ; i++ {
		job = chatJob(i)
		s, done := r.route(job)
		done()
		if s == RoutedSubject(genq.VariantB, "w1") {
			break
		}
	}
	publishRouted(t, c, r, job)
	ack(t, next(t, w1, job, FromOwn))

	// w1 live but not pulling: w2 takes it once it waited past the bound.
	job.ID = testJob().ID
	publishRouted(t, c, r, job)
	d := next(t, w2, job, FromStolen)
	if waited := time.Since(d.Queued); waited < 300*time.Millisecond {
		t.Fatalf("stolen after %s, before the bound", waited)
	}
	ack(t, d)

	// w1 gone: w2 takes what w1's consumer would deliver, then sweeps it.
	job.ID = testJob().ID
	publishRouted(t, c, r, job)
	hbs.set(routedBeat("w2", 1))
	ack(t, next(t, w2, job, FromStolen))
	waitFor(t, "w1's empty consumer swept", func(ctx context.Context) bool {
		_, _ = w2.Next(300 * time.Millisecond)
		_, err := c.js.Consumer(ctx, JobsStream, RoutedConsumerName(genq.VariantB, "w1"))
		return err != nil
	})

	// A job on a subject with no consumer (routed as it was swept): its
	// consumer is restored and the job taken.
	job.ID = testJob().ID
	if _, err := c.publish(t.Context(), job, Interactive, RoutedSubject(genq.VariantB, "w1"), pubAckWait, publishGiveUp, false); err != nil {
		t.Fatal(err)
	}
	d, err := w2.Next(5 * time.Second)
	for end := time.Now().Add(10 * time.Second); d == nil && err == nil && time.Now().Before(end); {
		d, err = w2.Next(time.Second)
	}
	if err != nil || d == nil || d.Job.ID != job.ID || d.Source != FromStolen {
		t.Fatalf("orphan: %+v, %v", d, err)
	}
	// A restored consumer counts from 1 again: its first delivery reads
	// the run record all the same.
	if err := d.PutRecord(t.Context(), RunRecord{Finished: 1}); err != nil {
		t.Fatal(err)
	}
	if rec, err := d.Record(t.Context()); err != nil || rec.Finished != 1 {
		t.Fatalf("record of a routed first delivery: %+v, %v", rec, err)
	}
	ack(t, d)

	// Nothing is left, and nothing came twice.
	if d, err := w2.Next(time.Second); d != nil || err != nil {
		t.Fatalf("left over: %+v, %v", d, err)
	}
	if d, err := w1.Next(time.Second); d != nil || err != nil {
		t.Fatalf("left over on w1: %+v, %v", d, err)
	}
	info, err := c.js.Stream(t.Context(), JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.CachedInfo().State; st.Msgs != 0 {
		t.Fatalf("%d jobs left in the stream", st.Msgs)
	}
}

func ack(t *testing.T, d *Delivery) {
	t.Helper()
	if err := d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
}
