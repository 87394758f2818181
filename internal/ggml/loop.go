package ggml

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
)

// scheduler runs continuous batching. One goroutine (loop) owns every
// sequence and the KV cache; Generate calls only hand it requests and wait.
//
// Each forward step carries one token for every decoding sequence and fills
// the rest of its budget (BatchSize) with prompt chunks, oldest request
// first, so a long prompt never stalls the sequences already decoding.
//
// Steps can be pipelined (Config.Pipeline): while step N computes, the
// graph of step N+1 is built. A decoding sequence's next input is the token
// step N will sample, not yet known, so step N+1 gets a placeholder that is
// filled in between sampling step N and starting step N+1. The price: a
// sequence that stops at step N still has a token in step N+1, whose result
// is thrown away, and its KV cells are freed only once no step in flight
// includes it. The overlap pays when a GPU computes and the CPU is idle; on
// a small CPU the builder competes with ggml's threads for cores and loses
// (docs/benchmarks.md), so there steps run one after the other, and the
// compute runs on the loop's own goroutine.
type scheduler struct {
	engine *engine
	submit chan *request
	// exclusive runs a function on the loop while no sequence holds a
	// slot, so it may use the cache alone.
	exclusive chan func()
	quit      chan struct{}
	stopOnce  sync.Once
	stopped   chan struct{}

	waiting []*request
	active  []*sequence // in admission order
	window  window      // since the last throughput log line
	free    []int       // cache slots no sequence holds
	groups  int         // bisection groups made so far (failStep)
	// fault, when set (tests), fails a computed step it returns an error for.
	fault func(*step) error

	stats schedulerStats
}

func newScheduler(e *engine) *scheduler {
	s := &scheduler{
		engine:    e,
		submit:    make(chan *request, e.slots),
		exclusive: make(chan func()),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	for i := range e.slots {
		s.free = append(s.free, i)
	}
	return s
}

var errClosed = errors.New("text backend closed")

// run submits req and waits for its answer or for ctx to end.
func (s *scheduler) run(ctx context.Context, req *request) (seqResult, error) {
	closed := genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down")
	select {
	case <-s.quit:
		return seqResult{}, closed
	default:
	}
	req.submitted = time.Now()
	select {
	case s.submit <- req:
	case <-ctx.Done():
		return seqResult{}, fmt.Errorf("text generation: %w", ctx.Err())
	case <-s.quit:
		return seqResult{}, closed
	}
	select {
	case <-req.done:
		return req.res, req.err
	case <-s.stopped:
		// The loop ended; it may have stopped before it saw req.
		select {
		case <-req.done:
			return req.res, req.err
		default:
			return seqResult{}, closed
		}
	case <-ctx.Done():
		// The scheduler sees the flag before its next step and frees the
		// slot; the caller does not wait for that.
		req.cancelled.Store(true)
		return seqResult{}, fmt.Errorf("text generation: %w", ctx.Err())
	}
}

// exclusively runs fn on the loop once no sequence holds a slot, and waits
// for it. Requests that arrive meanwhile wait until fn returns.
func (s *scheduler) exclusively(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case s.exclusive <- func() { defer close(done); fn() }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	<-done
	return nil
}

func (s *scheduler) stop() {
	s.stopOnce.Do(func() { close(s.quit) })
	<-s.stopped
}

func (s *scheduler) loop() {
	// The loop runs ggml's compute in cgo calls on its own thread (one
	// compute thread for small models) between short stretches of Go. Kept
	// on one OS thread, it is not queued behind the process's other
	// goroutines each time a call returns (docs/benchmarks.md).
	runtime.LockOSThread()
	defer close(s.stopped)
	var inflight *step
	defer func() {
		if inflight != nil {
			<-inflight.done
			inflight.ctx.Close()
		}
		s.failAll(genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down"))
	}()

	end := func(st, next *step) {
		<-st.done
		t := time.Now()
		s.finish(st, next)
		st.took.finish = time.Since(t)
		st.ctx.Close()
		s.record(st)
	}
	for {
		if inflight != nil && !s.engine.pipeline {
			end(inflight, nil)
			inflight = nil
		}
		if !s.admit(inflight == nil) {
			return
		}
		t := time.Now()
		next, err := s.plan()
		if next != nil {
			next.took.plan = time.Since(t)
		}
		if err != nil {
			s.fail(err)
			next = nil
		}
		if inflight != nil {
			end(inflight, next)
			inflight = nil
		}
		if next != nil {
			s.launch(next)
			inflight = next
		}
	}
}

// admit takes new requests into free slots. When idle is true and nothing
// is active, it blocks for the next request. It reports false once the
// scheduler must stop.
func (s *scheduler) admit(idle bool) bool {
	for {
		select {
		case <-s.quit:
			return false
		default:
		}
		if idle && len(s.active) == 0 && len(s.waiting) == 0 {
			// Every slot is free here: the cache holds only the shared prefix.
			select {
			case req := <-s.submit:
				s.waiting = append(s.waiting, req)
			case fn := <-s.exclusive:
				fn()
				continue
			case <-s.quit:
				return false
			}
		}
		// Take whatever else has arrived without waiting.
	drain:
		for {
			select {
			case req := <-s.submit:
				s.waiting = append(s.waiting, req)
			default:
				break drain
			}
		}
		s.release()
		for len(s.waiting) > 0 && len(s.free) > 0 {
			req := s.waiting[0]
			s.waiting = s.waiting[1:]
			if req.cancelled.Load() {
				continue
			}
			s.start(req)
		}
		if len(s.active) > 0 || !idle {
			return true
		}
		// Every waiting request was cancelled: wait again.
	}
}

// start gives req a slot, sharing the cached system prefix when its prompt
// begins with it. The lowest free slot: the decoding sequences' slots then
// stay packed, and the stream graph attends over the range they span.
func (s *scheduler) start(req *request) {
	i := slices.Index(s.free, slices.Min(s.free))
	slot := s.free[i]
	s.free = slices.Delete(s.free, i, i+1)
	seq := &sequence{req: req, slot: slot}
	s.startFromPrefix(seq)
	s.active = append(s.active, seq)
	s.stats.admitted.Add(1)
}

// startFromPrefix puts seq at the start of its prompt: after the cached
// shared prefix, copied into its slot, when the prompt begins with it. A
// request whose prompt is scored computes every token itself: copied
// cells come with no logits.
func (s *scheduler) startFromPrefix(seq *sequence) {
	e, prompt := s.engine, seq.req.prompt
	seq.pending, seq.pos = prompt, 0
	n := len(e.prefix)
	if n == 0 || n >= len(prompt) || seq.req.scorePrompt() || !slices.Equal(prompt[:n], e.prefix) {
		return
	}
	if err := e.graph.copyPrefix(e.prefixSeq(), seq.slot, int32(n)); err == nil {
		seq.pending, seq.pos = prompt[n:], int32(n)
	}
}

// record counts a finished step and, every throughputLogEvery while the
// scheduler is busy, logs its throughput.
func (s *scheduler) record(st *step) {
	s.stats.record(st.took, st.decodeOnly, len(st.draws))
	now := time.Now()
	if now.Sub(s.window.start) < throughputLogEvery {
		return
	}
	w := s.stats.window(now)
	t, ok := w.since(s.window)
	s.window = w
	if !ok {
		return
	}
	active := 0
	for _, seq := range s.active {
		if !seq.finished {
			active++
		}
	}
	s.engine.log.Info("text throughput",
		"tokens_per_s", t.tokensPerSecond, "steps", t.steps, "active", active, "waiting", len(s.waiting),
		"plan_ms", t.planMS, "compute_ms", t.computeMS, "finish_ms", t.finishMS)
}

// release frees the slots of finished sequences that no step in flight
// still writes to.
func (s *scheduler) release() {
	kept := s.active[:0]
	for _, seq := range s.active {
		if !seq.finished && seq.req.cancelled.Load() {
			seq.finished = true
		}
		if seq.redo && !seq.finished && seq.inflight == 0 {
			s.restart(seq)
		}
		if seq.finished && seq.inflight == 0 {
			if err := s.engine.graph.clear(seq.slot); err != nil {
				// Remove from 0 never shifts, so this cannot happen; if it
				// did, the slot must not be reused with stale cells.
				s.engine.log.Error("free cache slot", "slot", seq.slot, "err", err)
				continue
			}
			s.free = append(s.free, seq.slot)
			continue
		}
		kept = append(kept, seq)
	}
	clear(s.active[len(kept):])
	s.active = kept
}
