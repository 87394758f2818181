// Package pause waits a while unless the caller's context ends first: the
// one wait the retry loops (the tenants' counters, their store's reads,
// the hub's downloads) share, which the standard library lacks.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, whichever comes first: nil after d,
// ctx's error otherwise. A timer, not time.Sleep, so that a cancelled
// caller is not held for the rest of d.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
