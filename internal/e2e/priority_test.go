package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/worker"
)

// fastBackend runs every job for a fixed time and never blocks on a
// channel, so thousands of jobs can go through it: it is the queueing
// that is under test, not a model.
type fastBackend struct {
	slots int
	run   time.Duration
}

func (b fastBackend) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu", Name: "test"}, Model: "fast-backend", Slots: b.slots}
}

func (b fastBackend) Close() error { return nil }

func (b fastBackend) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	select {
	case <-time.After(b.run):
		return genq.NewTextResult("done " + job.ID), nil
	case <-ctx.Done():
		return genq.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
}

// TestInteractiveBeforeBatch is the acceptance test of the two classes:
// with 2,000 batch jobs queued on one worker, 20 interactive requests are
// all answered 200, none gets 429 although the batch jobs outnumber
// QUEUE_CAPACITY, and they are answered while most of the batch is still
// queued: each waits for at most one running job per slot, not for the
// batch.
func TestInteractiveBeforeBatch(t *testing.T) {
	const (
		batchJobs   = 2000
		interactive = 20
		slots       = 2
	)
	settings := testSettings()
	settings.QueueCapacity = 100 // far below the batch: a shared capacity would answer 429
	settings.BatchQueueCapacity = 5000
	s := newStack(t, stackOptions{settings: &settings})
	s.startWorkerBackend(fastBackend{slots: slots, run: 3 * time.Millisecond})
	s.waitLive(1)

	empty := s.interactiveBurst(interactive)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	publishBatch(ctx, t, s.conn, s.variant, batchJobs)
	queued := s.batchMsgs()
	loaded := s.interactiveBurst(interactive)
	left := s.batchMsgs()

	t.Logf("interactive wait p50: %v against an empty queue, %v with %d batch jobs queued (max %v); batch jobs left when the last was answered: %d of %d",
		p50(empty), p50(loaded), queued, slices.Max(loaded), left, batchJobs)
	if queued < batchJobs/2 {
		t.Fatalf("only %d batch jobs were queued when the interactive requests were sent; the test proves nothing", queued)
	}
	// Running the whole batch first would take the worker at least
	// batchJobs/slots job times; the interactive requests must have been
	// answered long before.
	if left < queued/2 {
		t.Fatalf("the interactive requests were answered only after %d of %d batch jobs ran", queued-left, queued)
	}
}

// startWorkerBackend is startWorker for a backend other than testBackend.
func (s *stack) startWorkerBackend(b genq.Backend) {
	s.t.Helper()
	s.runWorker(b, time.Second)
}

// interactiveBurst sends n /generate requests at once and returns each
// one's latency; every one must be answered 200.
func (s *stack) interactiveBurst(n int) []time.Duration {
	s.t.Helper()
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r, err := s.generateCtx(s.t.Context(), fmt.Sprintf("interactive %d", i))
			took[i] = time.Since(start)
			if err != nil {
				s.t.Errorf("interactive request %d: %v", i, err)
				return
			}
			if r.status != http.StatusOK {
				s.t.Errorf("interactive request %d: status %d, want 200: %s", i, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if s.t.Failed() {
		s.t.FailNow()
	}
	return took
}

// publishBatch queues n batch jobs as genqctl submit does, nobody waiting
// on their replies.
func publishBatch(ctx context.Context, t *testing.T, c *natsqueue.Conn, v genq.Variant, n int) {
	t.Helper()
	const publishers = 8
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += publishers {
				job := genq.Job{Envelope: genq.Envelope{ID: fmt.Sprintf("batch-%d", i), Variant: v, Text: "batch job", Deadline: time.Now().Add(time.Minute)}}
				if _, err := c.Publish(ctx, job, natsqueue.AsBatch()); err != nil {
					errs <- fmt.Errorf("batch job %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// batchMsgs is how many batch jobs of the stack's variant are queued or running.
func (s *stack) batchMsgs() uint64 {
	s.t.Helper()
	jsz, err := s.ns.Jsz(&server.JSzOptions{Streams: true, Accounts: true})
	if err != nil {
		s.t.Fatal(err)
	}
	var n uint64
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			if st.Name == natsqueue.BatchStream {
				n += st.State.Msgs
			}
		}
	}
	return n
}

func p50(d []time.Duration) time.Duration {
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// classBackend is fastBackend that counts the batch jobs (ids batch-…)
// running at once.
type classBackend struct {
	fastBackend
	mu              sync.Mutex
	batch, maxBatch int
}

func (b *classBackend) Generate(ctx context.Context, job genq.Job, p func(genq.Progress)) (genq.Result, error) {
	isBatch := strings.HasPrefix(job.ID, "batch-")
	if isBatch {
		b.mu.Lock()
		b.batch++
		b.maxBatch = max(b.maxBatch, b.batch)
		b.mu.Unlock()
		defer func() { b.mu.Lock(); b.batch--; b.mu.Unlock() }()
	}
	return b.fastBackend.Generate(ctx, job, p)
}

// TestInteractiveSlotKept: a worker of 3 slots with one kept for
// interactive jobs runs at most 2 batch jobs at once, and an interactive
// request is answered while the batch still runs.
func TestInteractiveSlotKept(t *testing.T) {
	settings := testSettings()
	s := newStack(t, stackOptions{settings: &settings})
	b := &classBackend{fastBackend: fastBackend{slots: 3, run: 50 * time.Millisecond}}
	s.runWorkerWith(b, worker.Config{DrainGrace: time.Second, InteractiveSlots: 1})
	s.waitLive(1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	publishBatch(ctx, t, s.conn, s.variant, 60)
	time.Sleep(200 * time.Millisecond) // batch jobs running
	s.interactiveBurst(1)
	left := s.batchMsgs()
	for s.batchMsgs() > 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxBatch != 2 || left == 0 {
		t.Fatalf("at most %d batch jobs ran at once (want 2 of 3 slots); %d batch jobs were left when the interactive one was answered", b.maxBatch, left)
	}
}
