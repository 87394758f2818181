package ggmlimage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// stepBatcher runs the transformer for concurrent jobs: while jobs are
// denoising, it waits until each of them has its next step queued (or the
// batch is full), then runs the steps of one shape (latent size, text
// length) in one transformer call. Jobs step in lockstep, so every
// concurrent image shares each call; steps of another shape get the next
// call.
type stepBatcher struct {
	m        *Transformer
	maxItems int // batch items per call (each step brings 2: negative and prompt)

	mu      sync.Mutex
	wake    *sync.Cond
	active  int // jobs between enter and leave
	pending []*stepRequest
	closed  bool
	done    chan struct{}

	calls atomic.Int64
}

type stepRequest struct {
	in   TransformerInput
	out  []float32
	err  error
	done chan struct{}
}

var errBatcherClosed = errors.New("image backend closed")

func newStepBatcher(m *Transformer, maxItems int) *stepBatcher {
	b := &stepBatcher{m: m, maxItems: max(maxItems, 2), done: make(chan struct{})}
	b.wake = sync.NewCond(&b.mu)
	go b.run()
	return b
}

// enter and leave bracket a job's denoising loop: the batcher waits for
// the steps of the jobs inside.
func (b *stepBatcher) enter() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

func (b *stepBatcher) leave() {
	b.mu.Lock()
	b.active--
	b.wake.Signal()
	b.mu.Unlock()
}

// predict queues one step and waits for its output.
func (b *stepBatcher) predict(ctx context.Context, in TransformerInput) ([]float32, error) {
	r := &stepRequest{in: in, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errBatcherClosed
	}
	b.pending = append(b.pending, r)
	b.wake.Signal()
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.out, r.err
	case <-ctx.Done():
		// The call may still run with this step in it; its output is
		// dropped.
		return nil, ctx.Err()
	}
}

func (b *stepBatcher) close() {
	b.mu.Lock()
	b.closed = true
	b.wake.Signal()
	b.mu.Unlock()
	<-b.done
}

func (b *stepBatcher) run() {
	defer close(b.done)
	for {
		b.mu.Lock()
		for !b.closed && !b.ready() {
			b.wake.Wait()
		}
		if b.closed {
			for _, r := range b.pending {
				r.err = errBatcherClosed
				close(r.done)
			}
			b.pending = nil
			b.mu.Unlock()
			return
		}
		group := b.take()
		b.mu.Unlock()
		b.predict1(group)
	}
}

// ready says whether a call should start: steps are queued, and every
// denoising job has one queued or the batch is full.
func (b *stepBatcher) ready() bool {
	if len(b.pending) == 0 {
		return false
	}
	items := 0
	for _, r := range b.pending {
		items += r.in.N
	}
	return len(b.pending) >= b.active || items >= b.maxItems
}

// take removes the first queued step and those of its shape, up to
// maxItems items.
func (b *stepBatcher) take() []*stepRequest {
	first := b.pending[0].in
	var group, rest []*stepRequest
	items := 0
	for _, r := range b.pending {
		same := r.in.H == first.H && r.in.W == first.W && r.in.SeqLen == first.SeqLen
		if same && (len(group) == 0 || items+r.in.N <= b.maxItems) {
			group = append(group, r)
			items += r.in.N
		} else {
			rest = append(rest, r)
		}
	}
	b.pending = rest
	return group
}

// predict1 runs one call for a group of steps of one shape.
func (b *stepBatcher) predict1(group []*stepRequest) {
	b.calls.Add(1)
	in := group[0].in
	if len(group) > 1 {
		in = TransformerInput{H: in.H, W: in.W, SeqLen: in.SeqLen}
		for _, r := range group {
			in.N += r.in.N
			in.Latents = append(in.Latents, r.in.Latents...)
			in.Text = append(in.Text, r.in.Text...)
			in.Pooled = append(in.Pooled, r.in.Pooled...)
			in.Timesteps = append(in.Timesteps, r.in.Timesteps...)
		}
	}
	out, err := b.m.Predict(in)
	if err == nil && len(out) != len(in.Latents) {
		err = fmt.Errorf("transformer: %d output values for %d inputs", len(out), len(in.Latents))
	}
	off := 0
	for _, r := range group {
		n := len(r.in.Latents)
		if err != nil {
			r.err = err
		} else {
			r.out = out[off : off+n]
		}
		off += n
		close(r.done)
	}
}
