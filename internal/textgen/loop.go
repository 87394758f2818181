package textgen

import (
	"fmt"
	"runtime"
	"time"

	"github.com/genq/genq/internal/genq"
)

// loop is the scheduler's goroutine: it admits requests, plans each step,
// runs it and samples its rows, until stop.
//
// Steps run one after the other. llama.cpp builds a step's graph inside
// Decode, reusing the last one when the shape repeats, and the next step's
// tokens depend on this step's samples, so nothing is left to overlap.
func (s *scheduler) loop() {
	// The loop calls the engine on its own thread between short stretches
	// of Go. Kept on one OS thread, it is not queued behind the process's
	// other goroutines each time a call returns (docs/benchmarks.md). It
	// is unlocked before the goroutine ends: a goroutine that ends locked
	// takes its thread down with it, and OpenMP's state for that thread
	// (ggml's compute threads) with it, which corrupts the C heap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.stopped)
	defer s.failAll(genq.WrapError(genq.Unavailable, errClosed, "the text model is shutting down"))
	for {
		if !s.admit() {
			return
		}
		t := time.Now()
		st, err := s.plan()
		if err != nil {
			s.fail(err)
			continue
		}
		if st == nil {
			continue
		}
		st.took.plan = time.Since(t)
		s.fitThreads(t)
		s.compute(st)
		t = time.Now()
		s.finish(st)
		st.took.finish = time.Since(t)
		s.record(st)
	}
}

// fitThreads has the step compute on as many threads as the governor
// allows now (threads.go).
func (s *scheduler) fitThreads(now time.Time) {
	tm := s.model
	n := tm.governor.threads(now)
	if n == 0 || n == tm.threads {
		return
	}
	tm.log.Info("text compute threads", "threads", n, "was", tm.threads,
		"others_busy_cpus", fmt.Sprintf("%.2f", tm.governor.others))
	tm.ctx.SetThreads(n)
	tm.threads = n
}

// admit takes new requests into free slots. When nothing is active, it
// blocks for the next request. It reports false once the scheduler must
// stop.
func (s *scheduler) admit() bool {
	for {
		select {
		case <-s.quit:
			return false
		default:
		}
		if len(s.active) == 0 && len(s.waiting) == 0 {
			// Every slot is free here: the cache holds the shared prefix
			// and the cells finished sequences left (prefixcache.go).
			select {
			case req := <-s.submit:
				s.waiting = append(s.waiting, req)
				s.gather()
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
		if len(s.active) > 0 {
			return true
		}
		// Every waiting request was cancelled: wait again.
	}
}

// gatherFor is the longest an idle scheduler waits, after a request, for
// others sent with it: requests sent at once reach it a few hundred
// microseconds to a few milliseconds apart (each through its own pull of
// the queue), and without the wait the first would start a prompt step
// alone while the others wait out that step (tens of milliseconds).
const gatherFor = 3 * time.Millisecond

// gatherWindow is how long this model's scheduler waits: gatherFor, or a
// tenth of its last prompt step when that is shorter. Waiting pays only
// where the step it saves is long; a tiny model's whole prompt step takes
// well under a millisecond, and 3 ms of waiting were most of its time to
// the first token (1.9 → 3.3 ms at one request at a time).
func (s *scheduler) gatherWindow() time.Duration {
	if s.promptStep == 0 {
		return gatherFor
	}
	return min(gatherFor, s.promptStep/10)
}

// gatherAtLeast is the shortest wait gather makes. Go's runtime sleeps at
// least a millisecond when every goroutine waits (its poller's timeout is
// in whole milliseconds), so a shorter timer can cost a millisecond: for a
// tiny model that was half of an answer's time (1.1 of 1.9 ms beside a
// batch), where the wait can save only a fraction of a prompt step.
const gatherAtLeast = time.Millisecond

// gather takes the requests that arrive within gatherWindow; it does not
// wait when that window is shorter than gatherAtLeast.
func (s *scheduler) gather() {
	w := s.gatherWindow()
	if w < gatherAtLeast {
		return
	}
	t := time.NewTimer(w)
	defer t.Stop()
	for {
		select {
		case req := <-s.submit:
			s.waiting = append(s.waiting, req)
		case <-t.C:
			return
		case <-s.quit:
			return
		}
	}
}

// start gives req a slot: the one whose cached cells begin its prompt, or
// an empty one, the lowest, sharing the cached system prefix when its
// prompt begins with it (admitSlot).
func (s *scheduler) start(req *request) {
	seq := s.admitSlot(req)
	if err := s.model.narrowSlot(seq.slot, req); err != nil {
		// Whole rows serve any request: note it and go on without.
		s.model.log.Warn("narrow rows on the device", "slot", seq.slot, "err", err)
		s.model.ctx.SetDeviceTopK(seq.slot, 0)
	}
	s.active = append(s.active, seq)
	s.stats.admitted.Add(1)
	if req.admitted.IsZero() { // a sequence started over keeps its first
		req.admitted = time.Now()
	}
}

// record counts a finished step and, every throughputLogEvery while the
// scheduler is busy, logs its throughput.
func (s *scheduler) record(st *step) {
	s.stats.record(st.took, st.decodeOnly, len(st.draws))
	if !st.decodeOnly {
		s.promptStep = st.took.plan + st.took.compute + st.took.finish
	}
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
		"plan_ms", t.planMS, "compute_ms", t.computeMS, "finish_ms", t.finishMS, "threads", s.model.threads,
		"tenant_sat_out_steps", s.satOut)
	s.satOut = 0
}

// release frees the slots of finished sequences, and starts over those a
// failed step set to.
func (s *scheduler) release() {
	kept := s.active[:0]
	for _, seq := range s.active {
		if !seq.finished && seq.req.cancelled.Load() {
			seq.finished = true
		}
		if seq.redo && !seq.finished {
			s.restart(seq)
		}
		if seq.finished {
			if err := s.leave(seq); err != nil {
				// Remove from 0 never fails on a KV cache; if it did, the
				// slot must not be reused with stale cells.
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
