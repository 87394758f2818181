package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"testing"
	"time"
)

func TestRetryable(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"network", context.Background(), &url.Error{Op: "Get", URL: "x", Err: io.ErrUnexpectedEOF}, true},
		{"503", context.Background(), &HTTPError{StatusCode: 503}, true},
		{"429", context.Background(), &HTTPError{StatusCode: 429}, true},
		{"501", context.Background(), &HTTPError{StatusCode: 501}, false},
		{"403", context.Background(), &HTTPError{StatusCode: 403}, false},
		{"404", context.Background(), &HTTPError{StatusCode: 404}, false},
		{"wrapped 500", context.Background(), fmt.Errorf("x: %w", &HTTPError{StatusCode: 500}), true},
		{"permanent", context.Background(), permanent(ErrIntegrity), false},
		{"resumed integrity", context.Background(), fmt.Errorf("%w (after a resume)", ErrIntegrity), true},
		{"our cancellation", canceled, context.Canceled, false},
		{"stalled", context.Background(), errStalled, true},
	}
	for _, tt := range tests {
		if got := retryable(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: retryable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRetryPolicy(t *testing.T) {
	p := RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}
	tests := []struct {
		name      string
		errs      []error // what each try returns; the last repeats
		wantTries int
		wantErr   error
		wantDelay time.Duration // at least, before the second try
	}{
		{"success", []error{nil}, 1, nil, 0},
		{"recovers", []error{&HTTPError{StatusCode: 502}, nil}, 2, nil, 0},
		{"gives up", []error{&HTTPError{StatusCode: 502}}, 3, errLastRetryable, 0},
		{"no retry on 403", []error{&HTTPError{StatusCode: 403}}, 1, ErrAccessDenied, 0},
		{"Retry-After, capped", []error{&HTTPError{StatusCode: 429, RetryAfter: time.Hour}, nil}, 2, nil, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tries := 0
			var delays []time.Duration
			err := p.doNotify(context.Background(), func(context.Context) error {
				err := tt.errs[min(tries, len(tt.errs)-1)]
				tries++
				return err
			}, func(_ int, d time.Duration, _ error) { delays = append(delays, d) })
			if tries != tt.wantTries {
				t.Errorf("tries = %d, want %d", tries, tt.wantTries)
			}
			switch {
			case tt.wantErr == errLastRetryable && !errors.Is(err, errRetryable):
				t.Errorf("err = %v, want the last 502", err)
			case tt.wantErr != errLastRetryable && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantDelay > 0 && (len(delays) == 0 || delays[0] != tt.wantDelay) {
				t.Errorf("delays %v, want the first to be %v", delays, tt.wantDelay)
			}
		})
	}
}

// errLastRetryable stands for "the last retryable error" in the table.
var errLastRetryable = errors.New("the last retryable error")
