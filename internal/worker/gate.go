package worker

import (
	"context"
	"sync"
)

// gate lets jobs run side by side, or one suspect alone: a suspect (a
// redelivered job whose last run ended without a word, docs/protocol.md §5)
// waits for the jobs running to finish, meanwhile no other job starts and
// the worker pulls nothing, and then runs with nothing beside it, so that
// if it kills the worker it kills nothing else.
type gate struct {
	mu      sync.Mutex
	running int  // jobs running side by side
	alone   bool // a suspect is running
	waiting int  // suspects waiting for the running jobs to finish
	changed chan struct{}
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

// open reports whether a job may start beside others, or a pull be made.
// Called with mu held.
func (g *gate) open() bool { return !g.alone && g.waiting == 0 }

// enter waits until the job may start: alone, or beside others. It fails
// with ctx's cause when ctx ends first.
func (g *gate) enter(ctx context.Context, alone bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !alone {
		if err := g.await(ctx, g.open); err != nil {
			return err
		}
		g.running++
		return nil
	}
	g.waiting++
	err := g.await(ctx, func() bool { return !g.alone && g.running == 0 })
	g.waiting--
	if err != nil {
		g.broadcast() // others may start again
		return err
	}
	g.alone = true
	return nil
}

// leave ends a job that enter let in.
func (g *gate) leave(alone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if alone {
		g.alone = false
	} else {
		g.running--
	}
	g.broadcast()
}

// waitOpen waits until jobs may run side by side: a slot pulls no job
// while a suspect waits or runs.
func (g *gate) waitOpen(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.await(ctx, g.open)
}

// await waits, mu held, until ok holds or ctx ends.
func (g *gate) await(ctx context.Context, ok func() bool) error {
	for !ok() {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			g.mu.Lock()
			return context.Cause(ctx)
		case <-ch:
		}
		g.mu.Lock()
	}
	return nil
}

func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}
