package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
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
				job := genq.Job{ID: fmt.Sprintf("batch-%d", i), Variant: v, Text: "batch job", Deadline: time.Now().Add(time.Minute)}
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
