package worker_test

import (
	"cmp"
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/worker"
)

// tokenCounting is a Backend whose every answer takes a known number of
// tokens: one per byte of the job's text, and its answer's bound. It
// notes which jobs it served, in order.
type tokenCounting struct {
	mu     sync.Mutex
	served []genq.Job
}

func (b *tokenCounting) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "counting", Slots: 1}
}

func (b *tokenCounting) Close() error { return nil }

func (b *tokenCounting) Generate(_ context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	b.mu.Lock()
	b.served = append(b.served, job)
	b.mu.Unlock()
	return genq.NewDetailedTextResult("x", genq.FinishLength, tokensOf(job), nil), nil
}

func tokensOf(job genq.Job) genq.Usage {
	return genq.Usage{PromptTokens: len(job.Text), CompletionTokens: job.MaxTokens}
}

// TestFairShareThroughWorkers: two tenants' backlogs, the heavy one's
// over three times as many jobs with prompts ten times as long, queued
// before any worker starts, served by real worker runtimes over a real
// nats-server. The backend reports tokens the jobs' estimates get wrong
// by four times (a byte a token), so the shares hold only when each charge
// is settled with the result's usage (without it the light tenant got
// 0.30 at 1:1). Counted while both waited: each worker's jobs up to its
// own last light one (servedWhileBothWaited). A heavy job is 210 tokens,
// a light one 30.
func TestFairShareThroughWorkers(t *testing.T) {
	const lightJobs = 300
	tests := []struct {
		name      string
		class     natsqueue.Class
		lightW    float64
		workers   int
		wantShare float64
	}{
		{"interactive, 1:1, one worker", natsqueue.Interactive, 1, 1, 0.5},
		{"batch, 1:1, one worker", natsqueue.Batch, 1, 1, 0.5},
		{"interactive, 3:1, two workers", natsqueue.Interactive, 3, 2, 0.75},
		{"batch, 3:1, two workers", natsqueue.Batch, 3, 2, 0.75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			tenantOf := map[string]string{}
			queue := func(tenant string, weight float64, n, textBytes int) {
				ctx := genq.WithShare(t.Context(), genq.Share{Tenant: tenant, Weight: weight})
				for range n {
					job := newJob(strings.Repeat("x", textBytes), time.Now().Add(time.Minute))
					job.MaxTokens = 10
					tenantOf[job.ID] = tenant
					if _, err := h.conn.Publish(ctx, job, natsqueue.WithClass(tt.class)); err != nil {
						t.Fatal(err)
					}
				}
			}
			queue("light", tt.lightW, lightJobs, 20)
			queue("heavy", 1, 1000, 200)
			backends := make([]*tokenCounting, tt.workers)
			for i := range backends {
				backends[i] = &tokenCounting{}
				h.startWorker("w"+string(rune('1'+i)), backends[i], time.Second)
			}
			waitServed(t, backends, tenantOf, "light", lightJobs)

			served := map[string]int{}
			for _, b := range backends {
				for tenant, n := range b.servedWhileBothWaited(tenantOf, "light") {
					served[tenant] += n
				}
			}
			got := float64(served["light"]) / float64(served["light"]+served["heavy"])
			t.Logf("tokens served while both waited: light %d, heavy %d: light's share %.3f", served["light"], served["heavy"], got)
			if math.Abs(got-tt.wantShare) > 0.1*tt.wantShare {
				t.Fatalf("light's share of the tokens %.3f, want %.3f within 10%%", got, tt.wantShare)
			}
		})
	}
}

// servedWhileBothWaited is the tokens this backend's worker served each
// tenant up to and including its last job of tenant last: all of them
// pulled while last had jobs waiting. A worker of one slot starts its
// jobs in the order it pulls them, but workers do not start theirs in the
// order they pulled them between them, so the jobs are cut per worker: a
// worker that pulled the last light job may start it well after the
// other, finding the light tenant's queue empty, has started heavy ones
// that no longer compete (docs/reliability.md, "The fair-share test under
// load"). What the cut leaves out: a worker's heavy turn after its own
// last light job, while the other still took light ones, at most one per
// worker.
func (b *tokenCounting) servedWhileBothWaited(tenantOf map[string]string, last string) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	end := 0
	for i, job := range b.served {
		if tenantOf[job.ID] == last {
			end = i + 1
		}
	}
	out := map[string]int{}
	for _, job := range b.served[:end] {
		u := tokensOf(job)
		out[tenantOf[job.ID]] += u.PromptTokens + u.CompletionTokens
	}
	return out
}

// waitServed waits until the backends served n distinct jobs of tenant
// between them (a job redelivered after a stall counts once).
func waitServed(t *testing.T, backends []*tokenCounting, tenantOf map[string]string, tenant string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		seen := map[string]bool{}
		for _, b := range backends {
			b.mu.Lock()
			for _, job := range b.served {
				if tenantOf[job.ID] == tenant {
					seen[job.ID] = true
				}
			}
			b.mu.Unlock()
		}
		if len(seen) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the workers did not serve %d jobs of %s in 30 s", n, tenant)
}

// held is a Backend of two slots (or slots) whose jobs run until
// released, telling the tenant of each job it starts.
type held struct {
	slots    int
	mu       sync.Mutex
	tenantOf map[string]string // by job id; set before the jobs are queued
	started  chan string
	release  chan struct{}
}

func (b *held) Info() genq.BackendInfo {
	return genq.BackendInfo{Device: genq.Device{Kind: "cpu"}, Model: "held", Slots: cmp.Or(b.slots, 2)}
}

func (b *held) Close() error { return nil }

func (b *held) Generate(ctx context.Context, job genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	b.mu.Lock()
	tenant := b.tenantOf[job.ID]
	b.mu.Unlock()
	b.started <- tenant
	select {
	case <-b.release:
	case <-ctx.Done():
		return genq.Result{}, ctx.Err()
	}
	return genq.NewDetailedTextResult("x", genq.FinishLength, tokensOf(job), nil), nil
}

// TestHeadroomThroughWorker: a worker that has seen the light tenant
// lately gives the heavy one, whose jobs wait, all its slots of the class
// but one, and the light tenant's next job starts at once in that one;
// without TENANT_HEADROOM the heavy tenant takes them all. In the batch
// lane the kept slot is the last batch slot: the one kept for interactive
// jobs does not count, as batch jobs cannot take it.
func TestHeadroomThroughWorker(t *testing.T) {
	tests := []struct {
		name  string
		class natsqueue.Class
		// slots: the worker's; interactiveSlots of them are kept for
		// interactive jobs, so the heavy tenant can hold two slots of
		// the class.
		slots, interactiveSlots int
		keep                    bool
	}{
		{"interactive, kept", natsqueue.Interactive, 2, 0, true},
		{"interactive, off", natsqueue.Interactive, 2, 0, false},
		{"batch, kept", natsqueue.Batch, 3, 1, true},
		{"batch, off", natsqueue.Batch, 3, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			b := &held{slots: tt.slots, tenantOf: map[string]string{}, started: make(chan string, 16), release: make(chan struct{})}
			queue := func(tenant string, n int) {
				ctx := genq.WithShare(t.Context(), genq.Share{Tenant: tenant, Weight: 1})
				for range n {
					job := newJob("hi", time.Now().Add(time.Minute))
					job.MaxTokens = 10
					b.mu.Lock()
					b.tenantOf[job.ID] = tenant
					b.mu.Unlock()
					if _, err := h.conn.Publish(ctx, job, natsqueue.WithClass(tt.class)); err != nil {
						t.Fatal(err)
					}
				}
			}
			h.startWorkerWith("w1", b, func(c *worker.Config) {
				c.InteractiveSlots = tt.interactiveSlots
				if tt.keep {
					c.TenantHeadroom = time.Minute
				}
			}, time.Second)
			next := func(within time.Duration) string {
				select {
				case tenant := <-b.started:
					return tenant
				case <-time.After(within):
					return ""
				}
			}
			queue("light", 1)
			if got := next(5 * time.Second); got != "light" {
				t.Fatalf("started %q, want the light tenant's job", got)
			}
			b.release <- struct{}{}
			queue("heavy", 3)
			if got := next(5 * time.Second); got != "heavy" {
				t.Fatalf("started %q, want a heavy job", got)
			}
			second := next(time.Second)
			switch {
			case tt.keep && second != "":
				t.Fatalf("a second job (%q) took the slot kept for the light tenant", second)
			case !tt.keep && second != "heavy":
				t.Fatalf("without headroom, started %q, want a second heavy job", second)
			}
			if tt.keep {
				queue("light", 1)
				if got := next(2 * time.Second); got != "light" {
					t.Fatalf("started %q, want the light tenant's job in the kept slot", got)
				}
			}
			close(b.release) // let every job end
		})
	}
}
