package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/worker"
)

// laneBackend runs batch jobs (text "batch job") for batchRun and others
// for interactiveRun, and counts the batch jobs that start while an
// interactive one has been running for settle or more.
type laneBackend struct {
	slots                    int
	batchRun, interactiveRun time.Duration
	settle                   time.Duration

	mu                sync.Mutex
	batch, mostBatch  int // running now; most at once, on an idle worker
	interactiveSince  time.Time
	startedBeside     int // batch jobs started beside a settled interactive one
	mostBesideRunning int // most batch jobs running then
}

func (b *laneBackend) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu", Name: "test"}, Model: "lane-backend", Slots: b.slots}
}

func (b *laneBackend) Close() error { return nil }

func (b *laneBackend) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	run := b.interactiveRun
	b.mu.Lock()
	if strings.HasPrefix(job.Text, "batch") {
		run = b.batchRun
		b.batch++
		if b.interactiveSince.IsZero() {
			b.mostBatch = max(b.mostBatch, b.batch)
		} else if time.Since(b.interactiveSince) >= b.settle {
			b.startedBeside++
			b.mostBesideRunning = max(b.mostBesideRunning, b.batch)
		}
		defer func() { b.mu.Lock(); b.batch--; b.mu.Unlock() }()
	} else {
		b.interactiveSince = time.Now()
		defer func() { b.mu.Lock(); b.interactiveSince = time.Time{}; b.mu.Unlock() }()
	}
	b.mu.Unlock()
	select {
	case <-time.After(run):
		return genq.NewTextResult("done " + job.ID), nil
	case <-ctx.Done():
		return genq.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
}

// TestBatchMakesRoomForInteractive: on a worker of 4 slots, one kept for
// interactive jobs, batch jobs fill the other 3 while no interactive job
// runs; while one does, at most BusyBatchSlots (1) run beside it, and the
// batch still moves.
func TestBatchMakesRoomForInteractive(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := &laneBackend{slots: 4, batchRun: 20 * time.Millisecond, interactiveRun: 1500 * time.Millisecond, settle: 200 * time.Millisecond}
	s.runWorkerWith(b, worker.Config{DrainGrace: time.Second, InteractiveSlots: 1, BusyBatchSlots: 1})
	s.waitLive(1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	publishBatch(ctx, t, s.conn, s.variant, 400)
	time.Sleep(time.Second) // the batch runs alone
	s.interactiveBurst(1)   // and beside one interactive job of 1.5 s
	b.mu.Lock()
	defer b.mu.Unlock()
	t.Logf("batch jobs at once on the idle worker: %d; beside the interactive one: %d started, at most %d running", b.mostBatch, b.startedBeside, b.mostBesideRunning)
	if b.mostBatch != 3 {
		t.Errorf("%d batch jobs at once on an idle worker, want 3 (4 slots, 1 kept)", b.mostBatch)
	}
	if b.startedBeside == 0 {
		t.Error("no batch job ran beside the interactive one: the batch stopped")
	}
	if b.mostBesideRunning > 1 {
		t.Errorf("%d batch jobs ran beside an interactive one, want at most 1 (BusyBatchSlots)", b.mostBesideRunning)
	}
}
