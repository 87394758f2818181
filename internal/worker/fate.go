package worker

import (
	"context"
	"errors"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// The worker's retry and poison policy (docs/protocol.md §5, "Suspects"),
// as pure functions of a delivery's run record, so that it is read and
// tested in one place, without NATS.

// charged is how many attempts the job has used: its reported failures
// and its crashes while running alone. Crashes beside other jobs are not
// charged: the job may have died of a neighbour.
func charged(rec natsqueue.RunRecord) int { return rec.Failures + rec.AloneCrashes }

// arrival is what the worker knows of a delivery before it runs it.
type arrival struct {
	attempt int  // which delivery of the job this is, from 1
	last    bool // the consumer never delivers it again
	expired bool // its deadline passed while it was queued
}

// fate is what becomes of a delivery before it runs.
type fate int

const (
	fateRun          fate = iota
	fateExhausted         // dead-lettered: its charged attempts are used up
	fateLastDelivery      // dead-lettered: a crash now would leave its caller waiting for nothing
	fateExpired           // dropped: nobody waits for it any more
	fateFinished          // acked unrun: an earlier delivery delivered its result
)

// judgement is the fate of a delivery, and what it runs with if it runs.
type judgement struct {
	fate fate
	// record is the run record with a run alone that never reported its
	// end charged as a crash.
	record natsqueue.RunRecord
	// alone: the job was running when its worker died. It may be what
	// killed it, or a neighbour's victim; it runs alone to tell.
	alone bool
}

// judge decides the fate of a delivery from its run record. maxAttempts
// bounds the charged attempts.
func judge(a arrival, rec natsqueue.RunRecord, maxAttempts int) judgement {
	if rec.AloneAt > 0 {
		// A run alone began and never reported its end: it killed its worker.
		rec.AloneCrashes++
		rec.AloneAt = 0
	}
	// A redelivery whose previous delivery reported no failure was running
	// when its worker died.
	j := judgement{record: rec, alone: a.attempt > 1 && rec.LastFailure != a.attempt-1}
	switch {
	case rec.Finished > 0:
		// Its result was delivered and only the ack went unconfirmed:
		// running it again would answer twice.
		j.fate, j.alone = fateFinished, false
	case charged(rec) >= maxAttempts:
		j.fate = fateExhausted
	case a.last:
		// maxDeliver leaves room for the charged attempts and an uncharged
		// crash after each; deliveries used otherwise (hand-backs, suspects
		// that died waiting, records that could not be written) can still
		// bring a job here.
		j.fate = fateLastDelivery
	case a.expired:
		j.fate = fateExpired
	}
	return j
}

// crashReason is the reason a job given up without a reported failure is
// dead-lettered with: msg, and when its record holds a crash note, what
// the last worker that died holding it died of, the signal for its caller
// and the whole note (worker, where, delivery) for the dead letter.
func crashReason(rec natsqueue.RunRecord, msg string) error {
	if rec.Crash == nil {
		return genq.Errorf(genq.Internal, "%s", msg)
	}
	return genq.WrapError(genq.Internal, errors.New(rec.Crash.String()),
		msg+"; the last worker that died holding it died of "+rec.Crash.Cause)
}

// The causes with which the runtime ends a job's context.
var (
	errCancelledByCaller = errors.New("cancelled by its caller")
	errDrainTimedOut     = errors.New("drain grace period over")
)

// ending is how a run that returned an error ended.
type ending int

const (
	endFailed       ending = iota // the backend failed
	endCancelled                  // its caller cancelled it
	endDrained                    // the worker stopped and its grace period ran out
	endPastDeadline               // it ran past the job's deadline
	endRefused                    // the model refused the job as invalid
)

// endingOf tells how a run under jobCtx that returned err ended.
func endingOf(jobCtx context.Context, err error) ending {
	cause := context.Cause(jobCtx)
	switch {
	case errors.Is(cause, errCancelledByCaller):
		return endCancelled
	case errors.Is(cause, errDrainTimedOut):
		return endDrained
	case errors.Is(jobCtx.Err(), context.DeadlineExceeded):
		return endPastDeadline
	case genq.ErrorCode(err) == genq.Invalid:
		return endRefused
	}
	return endFailed
}

// next is what follows a run that ended in an error.
type next int

const (
	nextCancelled next = iota // settled as cancelled
	nextHandBack              // handed back to the queue, uncharged
	nextTimeout               // failed as timed out
	nextRefuse                // failed as invalid
	nextGiveUp                // dead-lettered: it failed on its last attempt
	nextRetry                 // delivered again after a delay
)

// recovery is what follows a failed run, and the run record to write
// first, if any.
type recovery struct {
	next next
	// record, when write is set, is to be stored before the job is settled.
	record natsqueue.RunRecord
	write  bool
	// attempts is how many attempts the job has used, this one included.
	attempts int
	// delay is the wait before the next delivery, for nextRetry.
	delay time.Duration
}

// afterFailure decides what follows a run that ended as e, on delivery a
// of a job whose run record is rec. A retry waits firstDelay doubled at
// each attempt, jittered by jitter (which returns a duration in [0, n)),
// so jobs that failed together (in one failed batch step, say) do not all
// meet again in the next.
func afterFailure(e ending, a arrival, rec natsqueue.RunRecord, maxAttempts int, firstDelay time.Duration, jitter func(n time.Duration) time.Duration) recovery {
	switch e {
	case endCancelled:
		return recovery{next: nextCancelled}
	case endDrained:
		// Not a crash: the next delivery must not charge it, nor wait for
		// this run to finish elsewhere.
		rec.AloneAt = 0
		rec.HandedBack = a.attempt
		return recovery{next: nextHandBack, record: rec, write: true}
	case endPastDeadline:
		return recovery{next: nextTimeout}
	case endRefused:
		return recovery{next: nextRefuse}
	}
	used := charged(rec) + 1
	if used >= maxAttempts || a.last {
		return recovery{next: nextGiveUp, attempts: used}
	}
	// Recorded, so that the next delivery knows this one ended in a
	// failure, not a crash, and counts it.
	rec.Failures++
	rec.LastFailure = a.attempt
	rec.AloneAt = 0
	base := firstDelay << (a.attempt - 1)
	return recovery{next: nextRetry, record: rec, write: true, attempts: used, delay: base/2 + jitter(base)}
}
