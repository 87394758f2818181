package textgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
)

// scheduler runs continuous batching. One goroutine (loop) owns every
// sequence and the engine's context; Generate calls only hand it requests
// and wait.
//
// Each step carries one token for every decoding sequence and fills the
// rest of its budget (BatchSize) with prompt chunks, oldest request first,
// so a long prompt never stalls the sequences already decoding.
type scheduler struct {
	model  *textModel
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
	// promptStep is how long the last step with prompt tokens took
	// (gatherWindow).
	promptStep time.Duration
	// fault, when set (tests), fails a computed step it returns an error for.
	fault func(*step) error

	stats schedulerStats
	cache *prefixCache
	// shares, when set, has tenants over their share of the model sit
	// out steps (share.go).
	shares *stepShare
	// satOut counts the steps some tenant sat out since the last
	// throughput log line.
	satOut int
}

func newScheduler(tm *textModel) *scheduler {
	s := &scheduler{
		model:     tm,
		submit:    make(chan *request, tm.slots),
		exclusive: make(chan func()),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
		cache:     newPrefixCache(tm.prefixCache, tm.slots, tm.contextSize),
	}
	for i := range tm.slots {
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
