package natsqueue

import (
	"context"
	"fmt"

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
