package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AttemptsBucket is the KV bucket of per-job run records (docs/protocol.md
// §5, "Suspects"): key = job id. It is part of the protocol.
const AttemptsBucket = "GENQ_ATTEMPTS"

// RunRecord is what the workers that ran a job before wrote about its
// earlier deliveries, stored so that it survives their crash. natsqueue
// stores it and does not interpret it.
type RunRecord struct {
	// Seq is the stream sequence of the job message the record belongs to:
	// a record of an earlier job under the same id (a batch rerun) is not
	// this job's.
	Seq uint64 `json:"seq"`
	// Failures counts runs that ended in a failure the worker reported.
	Failures int `json:"failures"`
	// LastFailure is the delivery of the last reported failure.
	LastFailure int `json:"last_failure,omitempty"`
	// AloneCrashes counts runs alone that ended without a word (their
	// worker died), as far as they have been found out.
	AloneCrashes int `json:"alone_crashes"`
	// AloneAt is the delivery of a run alone whose end is not recorded
	// yet: if a later delivery finds it, that run's worker died.
	AloneAt int `json:"alone_at,omitempty"`
	// Finished is the delivery whose run delivered its result, written
	// when the ack that followed went unconfirmed: a later delivery is
	// then settled without running.
	Finished int `json:"finished,omitempty"`
	// HandedBack is the delivery a stopping worker handed back unfinished:
	// its run is known to have ended, so the next delivery need not wait
	// for it.
	HandedBack int `json:"handed_back,omitempty"`
	// Crash, written by the supervisor of a worker that died holding the
	// job, says what it died of, for the delivery it held: the latest such
	// death. It is a note for people (logs, the dead letter's reason);
	// the retry and poison rules never read it.
	Crash *CrashNote `json:"crash,omitempty"`
}

// CrashNote is what a worker that died holding a job died of
// (docs/protocol.md §5, "Crash notes").
type CrashNote struct {
	// Delivery is the job's delivery the worker held, from 1.
	Delivery int `json:"delivery"`
	// Worker is the dead worker's id.
	Worker string `json:"worker"`
	// Cause is what it died of: "SIGILL (illegal instruction)".
	Cause string `json:"cause"`
	// Where is where, as far as the Go runtime's crash report tells:
	// "in C code called from llama.Decode, raised by the CPU".
	Where string `json:"where,omitempty"`
	// Running: the job was running; else it was held, waiting to run.
	Running bool `json:"running"`
	// At is when the supervisor saw the death.
	At time.Time `json:"at"`
}

// String says it in a sentence's words: "worker w-1 died of SIGILL
// (illegal instruction) in C code called from llama.Decode while running
// delivery 2".
func (n CrashNote) String() string {
	s := "worker " + n.Worker + " died of " + n.Cause
	if n.Where != "" {
		s += " " + n.Where + ","
	}
	if n.Running {
		return fmt.Sprintf("%s while running delivery %d", s, n.Delivery)
	}
	return fmt.Sprintf("%s while delivery %d waited to run", s, n.Delivery)
}

// JobCrash is a crash note for one job.
type JobCrash struct {
	JobID string
	// Seq is the job message's stream sequence: the note goes into the
	// record of this job, not of an earlier one under its id.
	Seq  uint64
	Note CrashNote
}

// NoteCrashes writes each note into its job's run record, keeping what
// the record holds (a read, then a write conditional on the revision read,
// tried again when another write came between). It is for the supervisor of
// a worker that died, which has no connection open: it connects with o,
// and gives up when ctx ends. It is done long before the jobs' redelivery,
// which waits for their AckWait.
func NoteCrashes(ctx context.Context, o ConnectOptions, log *slog.Logger, crashes []JobCrash) error {
	nc, err := connect(o, DefaultSettings().AckWait, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	var kv jetstream.KeyValue
	// ctx bounds the tries; each is bounded by settleTry.
	err = retryEach(ctx, time.Hour, settleTry, func(ctx context.Context) error {
		kv, err = js.KeyValue(ctx, AttemptsBucket)
		if err != nil {
			return fmt.Errorf("bind %s: %w", AttemptsBucket, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range crashes {
		if err := noteCrash(ctx, kv, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// noteCrash puts c's note into its job's record, conditionally on the
// revision it read; a write that another came before is tried again, read
// first, until it lands or ctx ends.
func noteCrash(ctx context.Context, kv jetstream.KeyValue, c JobCrash) error {
	t := tries{within: time.Hour, each: settleTry, eachMax: settleTry, permanent: func(err error) bool {
		return errors.Is(err, jetstream.ErrInvalidKey) // ctx bounds the rest
	}}
	return retryTries(ctx, t, func(ctx context.Context) error {
		var rec RunRecord
		var rev uint64
		e, err := kv.Get(ctx, c.JobID)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read the run record of %s: %w", c.JobID, err)
		default:
			rev = e.Revision()
			if json.Unmarshal(e.Value(), &rec) != nil || rec.Seq != c.Seq {
				rec = RunRecord{} // unreadable, or an earlier job's
			}
		}
		rec.Seq = c.Seq
		note := c.Note
		rec.Crash = &note
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, c.JobID, b)
		} else {
			_, err = kv.Update(ctx, c.JobID, b, rev)
		}
		if err != nil {
			return fmt.Errorf("write the run record of %s: %w", c.JobID, err)
		}
		return nil
	})
}

// attemptsKV binds the bucket on first use: only workers need it, and only
// for redelivered or failed jobs.
func (c *Conn) attemptsKV(ctx context.Context) (jetstream.KeyValue, error) {
	c.attemptsMu.Lock()
	defer c.attemptsMu.Unlock()
	if c.attempts != nil {
		return c.attempts, nil
	}
	kv, err := c.js.KeyValue(ctx, AttemptsBucket)
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", AttemptsBucket, err)
	}
	c.attempts = kv
	return kv, nil
}
