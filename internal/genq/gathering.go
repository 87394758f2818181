package genq

import (
	"context"
	"sync"
)

// A Gathering is jobs a worker pulled in one fetch for a backend that runs
// many jobs' work in one step (BackendInfo.Gather). Each job arrives once:
// when its work is queued in the backend, or when it ends without any. The
// backend holds its next step until the gathering is ready, so the jobs
// that were waiting together share a step instead of the first running
// alone while the others are still on their way through the worker.
type Gathering struct {
	mu    sync.Mutex
	left  int
	ready chan struct{}
}

// NewGathering makes a gathering of n jobs.
func NewGathering(n int) *Gathering {
	g := &Gathering{left: n, ready: make(chan struct{})}
	if n <= 0 {
		close(g.ready)
	}
	return g
}

// Ready is closed once every job of the gathering has arrived.
func (g *Gathering) Ready() <-chan struct{} { return g.ready }

func (g *Gathering) arrive() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left--; g.left == 0 {
		close(g.ready)
	}
}

// gathered is one job's place in a gathering: it arrives once, however
// many times it is told.
type gathered struct {
	g    *Gathering
	once sync.Once
}

type gatheredKey struct{}

// WithGathering returns ctx for one job of g, and the job's arrival, which
// the worker calls once the job is settled (a no-op if the backend already
// had it arrive).
func WithGathering(ctx context.Context, g *Gathering) (context.Context, func()) {
	j := &gathered{g: g}
	return context.WithValue(ctx, gatheredKey{}, j), func() { j.once.Do(g.arrive) }
}

// Arrive tells the gathering of ctx's job, if any, that the job's work is
// queued, and returns the gathering (nil when the job was not gathered).
func Arrive(ctx context.Context) *Gathering {
	j, _ := ctx.Value(gatheredKey{}).(*gathered)
	if j == nil {
		return nil
	}
	j.once.Do(j.g.arrive)
	return j.g
}
