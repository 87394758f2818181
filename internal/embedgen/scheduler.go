package embedgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genq/genq/internal/genq"
)

// encoder computes the pooled vector of each input, all of them in one
// engine step.
type encoder interface {
	encode(inputs [][]int32) ([][]float32, error)
}

// scheduler packs the inputs of every job the backend holds into shared
// engine steps: one goroutine runs the steps, in arrival order, each as many
// queued inputs as fit its bounds, whichever jobs they belong to. Inputs
// that arrive while a step runs wait for the next, so jobs that come
// together are computed together; a step that would hold far fewer
// inputs than the one before waits a little for more (awaitFill).
type scheduler struct {
	enc       encoder
	log       *slog.Logger
	maxTokens int // per step, over its inputs; a longer input runs alone
	maxInputs int // per step
	// fillWait bounds awaitFill's wait after a step of that shape.
	fillWait func(last stepShape) time.Duration

	mu    sync.Mutex
	queue []item
	// gatherings are those whose first job's inputs are queued: the next
	// step waits for the rest of their jobs (genq.Gathering).
	gatherings []<-chan struct{}
	wake       chan struct{}
	quit       chan struct{}
	ended      chan struct{}

	steps  atomic.Int64
	inputs atomic.Int64
}

// request is one job's inputs on their way through the steps. Only the
// loop's goroutine writes it until done is closed.
type request struct {
	ctx     context.Context
	vectors [][]float32
	left    int
	err     error
	done    chan struct{}
}

// item is one input of a request.
type item struct {
	req    *request
	index  int
	tokens []int32
}

// errStopped fails the inputs still queued when the backend closes.
var errStopped = errors.New("the embedding backend is closed")

func newScheduler(enc encoder, maxTokens, maxInputs int, log *slog.Logger) *scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &scheduler{enc: enc, log: log, maxTokens: maxTokens, maxInputs: maxInputs, fillWait: fillWait,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), ended: make(chan struct{})}
}

// Stats count the engine steps run and the inputs they held.
type Stats struct {
	Steps  int64
	Inputs int64
}

func (s *scheduler) stats() Stats { return Stats{Steps: s.steps.Load(), Inputs: s.inputs.Load()} }

// queued is how many inputs wait for a step.
func (s *scheduler) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// submit queues a job's inputs and waits for their vectors, in order, or
// for ctx to end. An input longer than maxTokens gets a step of its own.
func (s *scheduler) submit(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	req := &request{ctx: ctx, vectors: make([][]float32, len(inputs)), left: len(inputs), done: make(chan struct{})}
	s.mu.Lock()
	for i, toks := range inputs {
		s.queue = append(s.queue, item{req: req, index: i, tokens: toks})
	}
	if g := genq.Arrive(ctx); g != nil {
		s.gatherings = append(s.gatherings, g.Ready())
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-req.done:
		return req.vectors, req.err
	case <-ctx.Done():
		// The loop drops the request's inputs still queued when it next
		// takes a step's; those in a running step finish unread.
		return nil, fmt.Errorf("embedding: %w", ctx.Err())
	}
}

// loop runs steps until stop. It keeps to one OS thread: ggml's OpenMP
// keeps a pool of worker threads per calling thread, so a loop that
// migrates between threads grows a pool on each, and a pool left behind
// spins on the cores the engine's current pool computes on.
func (s *scheduler) loop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.ended)
	for {
		select {
		case <-s.quit:
			s.failQueued(errStopped)
			return
		case <-s.wake:
		}
		if s.stopping() {
			s.failQueued(errStopped)
			return
		}
		var last stepShape
		for {
			s.awaitGatherings()
			s.awaitFill(last)
			batch := s.take()
			if len(batch) == 0 {
				break
			}
			start := time.Now()
			s.run(batch)
			last = stepShape{inputs: len(batch), took: time.Since(start)}
		}
	}
}

func (s *scheduler) stopping() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// stop ends the loop after its step, failing what is still queued.
func (s *scheduler) stop() {
	close(s.quit)
	<-s.ended
}

// gatherWait bounds how long a step waits for the jobs of a gathering
// still on their way. They take well under a millisecond each through the
// worker, and one that must run alone arrives at once; the bound is for
// the unforeseen, generous so that a busy machine does not split a step.
const gatherWait = time.Second

// awaitGatherings waits until the jobs of every gathering seen so far have
// arrived, for at most gatherWait, so that they share the next step.
func (s *scheduler) awaitGatherings() {
	s.mu.Lock()
	gs := s.gatherings
	s.gatherings = nil
	s.mu.Unlock()
	if len(gs) == 0 {
		return
	}
	timer := time.NewTimer(gatherWait)
	defer timer.Stop()
	for _, ready := range gs {
		select {
		case <-ready:
		case <-timer.C:
			return
		case <-s.quit:
			return
		}
	}
}

// stepShape is what a step held and how long it ran.
type stepShape struct {
	inputs int
	took   time.Duration
}

// A step about to run with fewer than half the inputs of the one before
// it waits for more, at most fillShare of that step's time and maxFill.
// Under load the callers the last step answered are sending their next
// inputs, which reach the worker a few milliseconds later, and an encoder
// computes an input in a step of two or three for half again what it
// does in a step of eight or more (docs/benchmarks.md, "Embeddings
// against llama-server"): without the wait, many callers fall into a
// large cohort and a small one whose steps cost the most. A step after
// one of fewer than minFillInputs never waits, so a lone caller's latency
// is unchanged.
const (
	fillShare     = 8 // the wait is at most 1/fillShare of the last step's time
	maxFill       = 10 * time.Millisecond
	minFillInputs = 4
)

// fillWait is the longest awaitFill waits after a step of last's shape.
func fillWait(last stepShape) time.Duration { return min(last.took/fillShare, maxFill) }

// awaitFill waits, after a step of last's shape, until the queue holds
// half as many inputs as last did (or a step's bounds' worth), within
// s.fillWait.
func (s *scheduler) awaitFill(last stepShape) {
	if last.inputs < minFillInputs {
		return
	}
	timer := time.NewTimer(s.fillWait(last))
	defer timer.Stop()
	for !s.filled(last.inputs) {
		select {
		case <-s.wake:
		case <-timer.C:
			return
		case <-s.quit:
			return
		}
	}
}

// filled reports whether the queue holds at least half of want inputs,
// or as many inputs or tokens as a step takes.
func (s *scheduler) filled(want int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if 2*len(s.queue) >= want || len(s.queue) >= s.maxInputs {
		return true
	}
	tokens := 0
	for _, it := range s.queue {
		tokens += len(it.tokens)
	}
	return tokens >= s.maxTokens
}

// take removes the next step's inputs from the front of the queue: as many
// as fit the step's bounds, skipping those of requests that ended.
func (s *scheduler) take() []item {
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []item
	tokens, n := 0, 0
	for ; n < len(s.queue); n++ {
		it := s.queue[n]
		if it.req.err != nil || it.req.ctx.Err() != nil {
			continue
		}
		if len(batch) == s.maxInputs || len(batch) > 0 && tokens+len(it.tokens) > s.maxTokens {
			break
		}
		batch = append(batch, it)
		tokens += len(it.tokens)
	}
	s.queue = s.queue[n:]
	return batch
}

// run computes one step and hands each vector to its request.
func (s *scheduler) run(batch []item) {
	inputs := make([][]int32, len(batch))
	tokens := 0
	for i, it := range batch {
		inputs[i] = it.tokens
		tokens += len(it.tokens)
	}
	start := time.Now()
	vecs, err := s.enc.encode(inputs)
	s.steps.Add(1)
	s.inputs.Add(int64(len(batch)))
	s.log.Debug("embedding step", "inputs", len(batch), "tokens", tokens, "ms", time.Since(start).Milliseconds(), "err", err)
	for i, it := range batch {
		req := it.req
		if req.err != nil {
			continue
		}
		if err != nil {
			req.err = err
			close(req.done)
			continue
		}
		req.vectors[it.index] = vecs[i]
		if req.left--; req.left == 0 {
			close(req.done)
		}
	}
}

// failQueued fails every request with inputs still queued.
func (s *scheduler) failQueued(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.queue {
		if it.req.err == nil {
			it.req.err = err
			close(it.req.done)
		}
	}
	s.queue = nil
}
