package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

func TestJudge(t *testing.T) {
	const maxAttempts = 3
	tests := []struct {
		name   string
		a      arrival
		rec    natsqueue.RunRecord
		fate   fate
		alone  bool
		record natsqueue.RunRecord
	}{
		{name: "first delivery runs", a: arrival{attempt: 1}, fate: fateRun},
		{name: "first delivery past its deadline is dropped", a: arrival{attempt: 1, expired: true}, fate: fateExpired},
		{
			name: "a redelivery after a reported failure runs beside others",
			a:    arrival{attempt: 2}, rec: natsqueue.RunRecord{Failures: 1, LastFailure: 1},
			fate: fateRun, record: natsqueue.RunRecord{Failures: 1, LastFailure: 1},
		},
		{name: "a redelivery without a reported failure runs alone", a: arrival{attempt: 2}, fate: fateRun, alone: true},
		{
			name: "a job that finished before its ack went unconfirmed is acked unrun",
			a:    arrival{attempt: 2}, rec: natsqueue.RunRecord{Finished: 1},
			fate: fateFinished, record: natsqueue.RunRecord{Finished: 1},
		},
		{
			name: "finished comes before exhausted, the last delivery and expiry",
			a:    arrival{attempt: 7, last: true, expired: true}, rec: natsqueue.RunRecord{Failures: 3, LastFailure: 3, Finished: 6},
			fate: fateFinished, record: natsqueue.RunRecord{Failures: 3, LastFailure: 3, Finished: 6},
		},
		{
			name: "an earlier failure does not clear a later crash",
			a:    arrival{attempt: 3}, rec: natsqueue.RunRecord{Failures: 1, LastFailure: 1},
			fate: fateRun, alone: true, record: natsqueue.RunRecord{Failures: 1, LastFailure: 1},
		},
		{
			name: "a run alone left open is charged as a crash",
			a:    arrival{attempt: 3}, rec: natsqueue.RunRecord{AloneAt: 2},
			fate: fateRun, alone: true, record: natsqueue.RunRecord{AloneCrashes: 1},
		},
		{
			name: "crashes alone use up the attempts",
			a:    arrival{attempt: 5}, rec: natsqueue.RunRecord{AloneCrashes: 2, AloneAt: 4},
			fate: fateExhausted, alone: true, record: natsqueue.RunRecord{AloneCrashes: 3},
		},
		{
			name: "failures and crashes alone count together",
			a:    arrival{attempt: 4}, rec: natsqueue.RunRecord{Failures: 2, LastFailure: 3, AloneCrashes: 1},
			fate: fateExhausted, record: natsqueue.RunRecord{Failures: 2, LastFailure: 3, AloneCrashes: 1},
		},
		{
			name: "exhausted comes before the last delivery and expiry",
			a:    arrival{attempt: 4, last: true, expired: true}, rec: natsqueue.RunRecord{Failures: 3, LastFailure: 3},
			fate: fateExhausted, record: natsqueue.RunRecord{Failures: 3, LastFailure: 3},
		},
		{
			name: "the last delivery is dead-lettered though attempts are left",
			a:    arrival{attempt: 7, last: true, expired: true}, rec: natsqueue.RunRecord{Failures: 1, LastFailure: 6},
			fate: fateLastDelivery, record: natsqueue.RunRecord{Failures: 1, LastFailure: 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := judge(tt.a, tt.rec, maxAttempts)
			if j.fate != tt.fate || j.alone != tt.alone || j.record != tt.record {
				t.Errorf("judge = {fate %d, alone %v, record %+v}, want {fate %d, alone %v, record %+v}",
					j.fate, j.alone, j.record, tt.fate, tt.alone, tt.record)
			}
		})
	}
}

func TestAfterFailure(t *testing.T) {
	const maxAttempts = 3
	half := func(n time.Duration) time.Duration { return n / 2 }
	tests := []struct {
		name string
		e    ending
		a    arrival
		rec  natsqueue.RunRecord
		want recovery
	}{
		{name: "cancelled", e: endCancelled, a: arrival{attempt: 2, last: true}, want: recovery{next: nextCancelled}},
		{name: "handed back beside others: recorded, so the next delivery does not wait for it", e: endDrained, a: arrival{attempt: 1},
			want: recovery{next: nextHandBack, write: true, record: natsqueue.RunRecord{HandedBack: 1}}},
		{
			name: "handed back alone: the open run is closed, uncharged",
			e:    endDrained, a: arrival{attempt: 2}, rec: natsqueue.RunRecord{Failures: 1, AloneAt: 2},
			want: recovery{next: nextHandBack, write: true, record: natsqueue.RunRecord{Failures: 1, HandedBack: 2}},
		},
		{name: "past its deadline", e: endPastDeadline, a: arrival{attempt: 1}, want: recovery{next: nextTimeout}},
		{name: "refused by the model", e: endRefused, a: arrival{attempt: 3, last: true}, want: recovery{next: nextRefuse}},
		{
			name: "first failure is retried after the first delay, jittered",
			e:    endFailed, a: arrival{attempt: 1},
			want: recovery{next: nextRetry, write: true, attempts: 1, delay: time.Second,
				record: natsqueue.RunRecord{Failures: 1, LastFailure: 1}},
		},
		{
			name: "a failure alone closes the open run and doubles the delay",
			e:    endFailed, a: arrival{attempt: 2}, rec: natsqueue.RunRecord{AloneAt: 2},
			want: recovery{next: nextRetry, write: true, attempts: 1, delay: 2 * time.Second,
				record: natsqueue.RunRecord{Failures: 1, LastFailure: 2}},
		},
		{
			name: "the failure that uses up the attempts gives up",
			e:    endFailed, a: arrival{attempt: 3}, rec: natsqueue.RunRecord{Failures: 1, LastFailure: 1, AloneCrashes: 1},
			want: recovery{next: nextGiveUp, attempts: 3},
		},
		{
			name: "a failure on the last delivery gives up",
			e:    endFailed, a: arrival{attempt: 2, last: true},
			want: recovery{next: nextGiveUp, attempts: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := afterFailure(tt.e, tt.a, tt.rec, maxAttempts, time.Second, half)
			if got != tt.want {
				t.Errorf("afterFailure = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRetryDelayJitter(t *testing.T) {
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 500 * time.Millisecond, 1500 * time.Millisecond},
		{2, time.Second, 3 * time.Second},
		{3, 2 * time.Second, 6 * time.Second},
	}
	for _, tt := range tests {
		for _, jitter := range []func(time.Duration) time.Duration{
			func(time.Duration) time.Duration { return 0 },
			func(n time.Duration) time.Duration { return n },
		} {
			rv := afterFailure(endFailed, arrival{attempt: tt.attempt}, natsqueue.RunRecord{}, 10, time.Second, jitter)
			if rv.delay < tt.min || rv.delay > tt.max {
				t.Errorf("attempt %d: delay %v, want within [%v, %v]", tt.attempt, rv.delay, tt.min, tt.max)
			}
		}
	}
}

func TestEndingOf(t *testing.T) {
	failed := errors.New("backend failed")
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	tests := []struct {
		name  string
		ctx   func() context.Context
		err   error
		want  ending
		cause error
	}{
		{name: "a backend failure", ctx: context.Background, err: failed, want: endFailed},
		{name: "refused", ctx: context.Background, err: genq.Errorf(genq.Invalid, "bad"), want: endRefused},
		{name: "past the deadline", ctx: func() context.Context { return past }, err: failed, want: endPastDeadline},
		{name: "cancelled by its caller", err: failed, cause: errCancelledByCaller, want: endCancelled},
		{name: "the drain's grace is over", err: genq.Errorf(genq.Invalid, "bad"), cause: errDrainTimedOut, want: endDrained},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			if tt.cause != nil {
				c, cancel := context.WithCancelCause(ctx)
				cancel(tt.cause)
				ctx = c
			}
			if got := endingOf(ctx, tt.err); got != tt.want {
				t.Errorf("endingOf = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestCrashNotesChangeNoFate: a crash note is for people; the poison rule
// judges a record with one as it judges the record without it.
func TestCrashNotesChangeNoFate(t *testing.T) {
	note := &natsqueue.CrashNote{Delivery: 2, Worker: "w-1", Cause: "SIGILL (illegal instruction)", Running: true}
	for _, rec := range []natsqueue.RunRecord{
		{},
		{AloneAt: 2},
		{Failures: 1, LastFailure: 2},
		{AloneCrashes: 2, AloneAt: 3},
		{Finished: 2},
	} {
		for _, a := range []arrival{{attempt: 3}, {attempt: 3, last: true}, {attempt: 3, expired: true}} {
			noted := rec
			noted.Crash = note
			without, with := judge(a, rec, 3), judge(a, noted, 3)
			if with.record.Crash != note {
				t.Errorf("%+v, %+v: the note was not kept", rec, a)
			}
			with.record.Crash = nil
			if with != without {
				t.Errorf("%+v, %+v: judged %+v with a crash note, %+v without", rec, a, with, without)
			}
		}
	}
}

func TestCrashReason(t *testing.T) {
	note := natsqueue.CrashNote{Delivery: 3, Worker: "w-2", Cause: "SIGILL (illegal instruction)",
		Where: "in C code called from llama.Decode, raised by the CPU", Running: true}
	for _, tc := range []struct {
		name              string
		rec               natsqueue.RunRecord
		message, internal string
	}{
		{"no note", natsqueue.RunRecord{AloneCrashes: 3}, "generation failed", "internal: generation failed"},
		{"a note", natsqueue.RunRecord{AloneCrashes: 3, Crash: &note},
			"generation failed; the last worker that died holding it died of SIGILL (illegal instruction)",
			"internal: generation failed; the last worker that died holding it died of SIGILL (illegal instruction): " +
				"worker w-2 died of SIGILL (illegal instruction) in C code called from llama.Decode, raised by the CPU, while running delivery 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := crashReason(tc.rec, "generation failed")
			if genq.ErrorCode(err) != genq.Internal || genq.ErrorMessage(err) != tc.message || err.Error() != tc.internal {
				t.Errorf("code %s, message %q, error %q;\nwant internal, %q, %q", genq.ErrorCode(err), genq.ErrorMessage(err), err.Error(), tc.message, tc.internal)
			}
		})
	}
}
