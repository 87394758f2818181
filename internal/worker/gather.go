package worker

import (
	"context"
	"sync"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// gather shares the pulls of a worker whose backend runs many jobs' work
// in one step (genq.BackendInfo.Gather): one idle slot at a time pulls,
// and a job that came with others waiting behind it takes as many more as
// there are idle slots, in one fetch, handing each to an idle slot. The
// jobs are one genq.Gathering, so the backend runs them in one step: with
// a pull outstanding on every idle slot, jobs that arrived together
// reached the engine one by one, the first alone in a step.
//
// The worker still never holds a job no slot is free to run: a fetch
// takes no more jobs than the slots waiting for one. The first pull waits
// until every slot is idle, so a worker that starts with jobs waiting
// takes as many at once as it has slots.
type gather struct {
	most    int           // jobs taken together, the first included
	slots   int           // the runtime's
	turn    chan struct{} // held by the one slot that pulls
	handoff chan handed

	mu     sync.Mutex
	idle   int  // slots waiting in wait, not yet handed a job
	opened bool // every slot has been idle once: the turn is free
}

// handed is a job passed to an idle slot, with its place in its gathering.
type handed struct {
	d      *natsqueue.Delivery
	ctx    context.Context // the job's, carrying its gathering
	arrive func()
	done   func() // its lane's
}

func newGather(most, slots int) *gather {
	if most <= 1 || slots <= 1 {
		return nil
	}
	g := &gather{most: min(most, slots), slots: slots, turn: make(chan struct{}, 1), handoff: make(chan handed)}
	g.turn <- struct{}{} // until every slot is idle
	return g
}

// wait blocks an idle slot until it is handed a job or may pull (its turn,
// given back with endTurn). Neither: ctx ended.
func (g *gather) wait(ctx context.Context) (h *handed, turn bool) {
	g.mu.Lock()
	g.idle++
	if !g.opened && g.idle == g.slots {
		g.opened = true
		<-g.turn
	}
	g.mu.Unlock()
	select {
	case got := <-g.handoff:
		return &got, false // the hander took it off idle
	case g.turn <- struct{}{}:
		g.leave()
		return nil, true
	case <-ctx.Done():
		g.leave()
		return nil, false
	}
}

func (g *gather) leave() {
	g.mu.Lock()
	g.idle--
	g.mu.Unlock()
}

func (g *gather) endTurn() { <-g.turn }

// idleSlots is how many slots wait for a job. While a slot holds the turn
// it can only grow: none of them takes the turn, and a handed job takes
// one off.
func (g *gather) idleSlots() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.idle
}

// claim takes n slots off idle, for the jobs about to be handed to them.
func (g *gather) claim(n int) {
	g.mu.Lock()
	g.idle -= n
	g.mu.Unlock()
}

// hand passes h to an idle slot; false when ctx ended first.
func (g *gather) hand(ctx context.Context, h handed) bool {
	select {
	case g.handoff <- h:
		return true
	case <-ctx.Done():
		return false
	}
}

// gatherMore takes, for the slot holding the turn, the jobs waiting
// behind d (as many as idle slots, at most g.most with d) and hands them
// to idle slots. It returns d's context and arrival: with none taken,
// jobsCtx and a no-op. A job that may have to run alone (a redelivery)
// gathers none.
func (r *Runtime) gatherMore(ctx, jobsCtx context.Context, puller *natsqueue.Puller, d *natsqueue.Delivery) (context.Context, func()) {
	g := r.gather
	if d == nil || d.Wakeup || d.Malformed != nil || d.Job.Attempt > 1 {
		return jobsCtx, func() {}
	}
	more, err := puller.Waiting(d, min(g.idleSlots(), g.most-1))
	if err != nil {
		r.log.Warn("could not pull the jobs waiting behind one", "err", err)
	}
	if len(more) == 0 {
		return jobsCtx, func() {}
	}
	g.claim(len(more))
	gathering := genq.NewGathering(1 + len(more))
	for i, m := range more {
		mctx, arrive := genq.WithGathering(jobsCtx, gathering)
		laneDone := r.lanes.took(m, false)
		h := handed{d: m, ctx: mctx, arrive: arrive, done: func() { laneDone(); puller.Settled(m) }}
		if !g.hand(ctx, h) {
			// Draining: the claimed slots are leaving; these jobs go back
			// for another worker.
			r.handBack(jobsCtx, gathering, puller, h, more[i+1:])
			break
		}
	}
	r.log.Debug("jobs pulled together", "jobs", 1+len(more))
	return genq.WithGathering(jobsCtx, gathering)
}

// handBack releases h's job, which no slot took, and the jobs behind it,
// none handed yet. Waiting counted each in the puller's headroom, and the
// gathering waits for each: every one is settled and arrives once.
func (r *Runtime) handBack(jobsCtx context.Context, gathering *genq.Gathering, puller *natsqueue.Puller, h handed, rest []*natsqueue.Delivery) {
	r.release(h.d)
	h.done()
	h.arrive()
	for _, m := range rest {
		r.release(m)
		puller.Settled(m)
		_, arrive := genq.WithGathering(jobsCtx, gathering)
		arrive()
	}
}

// release hands d back for another worker.
func (r *Runtime) release(d *natsqueue.Delivery) {
	if err := d.Release(); err != nil {
		r.log.Warn("could not hand a job back", "job_id", d.Job.ID, "err", err)
	}
}

// runHanded runs a job another slot pulled for this one.
func (r *Runtime) runHanded(ctx, jobsCtx context.Context, h *handed) {
	defer h.done()
	defer h.arrive()
	if ctx.Err() != nil {
		r.release(h.d)
		return
	}
	r.handle(h.ctx, h.d)
}
