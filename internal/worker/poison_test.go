package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/worker"
)

// errCrashed is what a crashed worker's model calls return: nothing the
// runtime does with it reaches NATS, whose connection is already closed.
var errCrashed = errors.New("the worker crashed")

// crashable is a four-slot backend of one worker's life: it runs healthy
// jobs for a while, and reports the start of the poison job, upon which the
// test crashes the worker (closes its NATS connection without a word, then
// ends every call).
type crashable struct {
	poison string
	dead   chan struct{}
	// poisoned gets the number of jobs running beside the poison job as it
	// starts.
	poisoned chan int

	mu        sync.Mutex
	active    int
	generated *tally // shared by every life: runs to a result
}

type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(id string) { t.mu.Lock(); t.n[id]++; t.mu.Unlock() }

func (t *tally) of(id string) int { t.mu.Lock(); defer t.mu.Unlock(); return t.n[id] }

func (b *crashable) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "crashable", Slots: 4}
}

func (b *crashable) Close() error { return nil }

func (b *crashable) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.active--; b.mu.Unlock() }()
	if job.ID == b.poison {
		// Its neighbours, pulled with it, start meanwhile (the crash comes
		// once all four run, or after a second).
		beside := 0
		for wait := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
			b.mu.Lock()
			beside = b.active - 1
			b.mu.Unlock()
			if beside == 3 || time.Now().After(wait) {
				break
			}
		}
		b.poisoned <- beside
		<-b.dead
		return genq.Result{}, errCrashed
	}
	select {
	case <-time.After(300 * time.Millisecond): // a long job, next to the poison's instant crash
	case <-b.dead:
		return genq.Result{}, errCrashed
	case <-ctx.Done():
		return genq.Result{}, ctx.Err()
	}
	b.generated.add(job.ID)
	return echo(ctx, job, 0)
}

// TestPoisonBlastRadius: one worker with four slots runs three healthy jobs
// and a poison job that kills it, and is restarted each time it dies. The
// healthy jobs die with it once, then run alone as suspects and succeed;
// only the poison job's crashes while alone count, and it is dead-lettered
// after three of them.
func TestPoisonBlastRadius(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	deadline := time.Now().Add(time.Minute)
	poison := newJob("poison", deadline)
	healthy := []genq.Job{newJob("one", deadline), newJob("two", deadline), newJob("three", deadline)}
	got := map[string]<-chan result{poison.ID: h.runAsync(poison)}
	for _, j := range healthy {
		got[j.ID] = h.runAsync(j)
	}
	time.Sleep(300 * time.Millisecond) // all four queued before the worker pulls

	generated := &tally{n: map[string]int{}}
	var besides []int
	results := map[string]result{} // written before all is closed
	all := make(chan struct{})
	go func() {
		for id, c := range got {
			results[id] = <-c
		}
		close(all)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
lives:
	for life := 1; ; life++ {
		b := &crashable{poison: poison.ID, dead: make(chan struct{}), poisoned: make(chan int, 1), generated: generated}
		conn := h.dial()
		cfg := worker.Config{
			WorkerID: fmt.Sprintf("w%d", life), Variant: variant, PollWait: 200 * time.Millisecond,
			HeartbeatEvery: time.Second, DrainGrace: time.Second, RetryDelay: 10 * time.Millisecond,
		}
		rt := worker.New(cfg, conn, b, testLog().With("worker_id", cfg.WorkerID), prometheus.NewRegistry())
		wctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rt.Run(wctx) }()
		select {
		case n := <-b.poisoned:
			besides = append(besides, n)
			conn.Close() // the crash: nothing more reaches NATS
			close(b.dead)
			stop()
			<-done
		case <-all:
			stop()
			<-done
			break lives
		case <-ctx.Done():
			stop()
			<-done
			t.Fatalf("not answered in time; the poison job started %d times, beside %v", len(besides), besides)
		}
	}

	for _, j := range healthy {
		r := results[j.ID]
		if r.err != nil {
			t.Errorf("healthy job %q: %v, want its answer", j.Text, r.err)
		}
	}
	if r := results[poison.ID]; genq.ErrorCode(r.err) != genq.Internal {
		t.Errorf("poison job: %+v, %v; want an internal error", r.a, r.err)
	}
	if h.deadLetter(poison.ID) == nil {
		t.Error("the poison job was not dead-lettered")
	}
	// Once with its first neighbours, then three times alone.
	if want := []int{3, 0, 0, 0}; !slices.Equal(besides, want) {
		t.Errorf("the poison job ran beside %v jobs, want %v", besides, want)
	}
	for _, j := range healthy {
		if n := generated.of(j.ID); n != 1 {
			t.Errorf("healthy job %q ran to a result %d times, want 1", j.Text, n)
		}
	}
}
