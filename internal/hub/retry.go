package hub

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/genq/genq/internal/pause"
)

// RetryPolicy says how often and how patiently a failed request is retried.
// Network errors, truncated bodies, stalls, 5xx and 429 are retried; other
// 4xx answers and integrity failures are not.
type RetryPolicy struct {
	Attempts  int           // tries in all, including the first; 0 means 5
	BaseDelay time.Duration // delay before the first retry, doubled each time; 0 means 1s
	MaxDelay  time.Duration // cap of the delay; 0 means 30s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	return p
}

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// retryable reports whether another try might succeed.
func retryable(ctx context.Context, err error) bool {
	var p permanentError
	switch {
	case err == nil, errors.As(err, &p), isContextErr(ctx, err):
		return false
	case errors.Is(err, errRetryable):
		return true
	}
	var he *HTTPError
	// Any other HTTP answer (401, 403, 404, 416…) is the server's considered
	// opinion; everything else is the network's, and worth another try.
	return !errors.As(err, &he)
}

// do runs try until it succeeds, fails for good, or runs out of attempts.
func (p RetryPolicy) do(ctx context.Context, try func(context.Context) error) error {
	return p.doNotify(ctx, try, nil)
}

// doNotify is do that tells notify about each retry before waiting for it.
func (p RetryPolicy) doNotify(ctx context.Context, try func(context.Context) error, notify func(attempt int, delay time.Duration, err error)) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = try(ctx)
		if !retryable(ctx, err) || attempt >= p.Attempts {
			return unwrapPermanent(err)
		}
		d := p.delay(attempt)
		var he *HTTPError
		if errors.As(err, &he) && he.RetryAfter > d {
			d = min(he.RetryAfter, p.MaxDelay) // the server knows best, up to our patience
		}
		if notify != nil {
			notify(attempt+1, d, err)
		}
		if waitErr := pause.For(ctx, d); waitErr != nil {
			return errors.Join(err, waitErr)
		}
	}
}

func unwrapPermanent(err error) error {
	var p permanentError
	if errors.As(err, &p) {
		return p.err
	}
	return err
}

// delay is exponential with full jitter, so that parallel downloads that
// failed together do not retry together.
func (p RetryPolicy) delay(attempt int) time.Duration {
	d := p.BaseDelay << (attempt - 1)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d/2 + rand.N(d/2+1)
}
