package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, stop := context.WithTimeout(t.Context(), -time.Second)
	defer stop()
	soon, stopSoon := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer stopSoon()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"waits the whole while", t.Context(), 20 * time.Millisecond, nil},
		{"a cancelled caller is not held", cancelled, time.Hour, context.Canceled},
		{"a caller past its deadline is not held", expired, time.Hour, context.DeadlineExceeded},
		{"a deadline within the wait ends it", soon, time.Hour, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			if err := For(tc.ctx, tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("For = %v, want %v", err, tc.want)
			}
			// A timer never fires early, so a nil answer means d went by.
			if took := time.Since(start); tc.want == nil && took < tc.d {
				t.Fatalf("For returned after %v, want at least %v", took, tc.d)
			}
		})
	}
}
