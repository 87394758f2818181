package natsqueue

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// settleTry bounds one wait for the server's confirmation of a settle (an
// ack, a term, a record or a store): short, because a confirmation lost
// with a server that died never comes, and the next try reaches the
// stream's new leader.
const settleTry = 2 * time.Second

// retrySettle calls try, each call bounded by settleTry, until it succeeds or
// within passes, with a short jittered pause between calls, even when ctx
// has ended: a settle must leave. It returns the last error.
func retrySettle(ctx context.Context, within time.Duration, try func(ctx context.Context) error) error {
	return retryEach(context.WithoutCancel(ctx), within, settleTry, try)
}

// retryEach calls try, each call bounded by each, until it succeeds,
// within passes or ctx ends.
func retryEach(ctx context.Context, within, each time.Duration, try func(ctx context.Context) error) error {
	return retryTries(ctx, tries{within: within, each: each, eachMax: each}, try)
}

// tries bound a retried call: the whole, and each call; a call that timed
// out doubles the next one's bound, up to eachMax. permanent, when set,
// says which errors end the retries at once.
type tries struct {
	within, each, eachMax time.Duration
	permanent             func(error) bool
}

// retryTries calls try until it succeeds, fails for good, t.within passes
// or ctx ends, with a jittered pause between calls that doubles up to a
// second, so that clients failing together do not retry together. It
// returns the last error.
func retryTries(ctx context.Context, t tries, try func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, t.within)
	defer cancel()
	pause, each := 50*time.Millisecond, t.each
	for {
		tctx, tcancel := context.WithTimeout(ctx, each)
		err := try(tctx)
		tcancel()
		if err == nil || (t.permanent != nil && t.permanent(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause/2 + rand.N(pause)):
		}
		pause = min(pause*2, time.Second)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			each = min(each*2, t.eachMax)
		}
	}
}
