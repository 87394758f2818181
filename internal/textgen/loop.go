package textgen

import (
	"runtime"
	"time"

	"github.com/genq/genq/internal/genq"
)

// loop is the scheduler's goroutine: it admits requests, plans each step,
// launches it and finishes the one before, until stop.
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
		if inflight != nil && !s.model.pipeline {
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
			// Every slot is free here: the cache holds the shared prefix
			// and the cells finished sequences left (prefixcache.go).
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

// start gives req a slot: the one whose cached cells begin its prompt, or
// an empty one, the lowest, sharing the cached system prefix when its
// prompt begins with it (admitSlot). Low slots keep the decoding
// sequences packed, and the stream graph attends over the range they span.
func (s *scheduler) start(req *request) {
	seq := s.admitSlot(req)
	s.active = append(s.active, seq)
	s.stats.admitted.Add(1)
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
	s.model.log.Info("text throughput",
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
			if err := s.leave(seq); err != nil {
				// Remove from 0 never shifts, so this cannot happen; if it
				// did, the slot must not be reused with stale cells.
				s.model.log.Error("free cache slot", "slot", seq.slot, "err", err)
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
