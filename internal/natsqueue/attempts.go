package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
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

// ensureAttemptsBucket creates or updates GENQ_ATTEMPTS. A record is of use
// while its job can be delivered, so it lives as long as a queued job.
func ensureAttemptsBucket(ctx context.Context, js jetstream.JetStream, s Settings) error {
	return ensureAsset(ctx, "bucket "+AttemptsBucket, func(ctx context.Context) error {
		return s.putKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: AttemptsBucket, Description: "genq per-job run records (suspects and failures)",
			TTL: s.MaxJobAge, History: 1, Storage: s.storage(), Replicas: s.replicas(),
		})
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

// Record reads the run record of the delivered job, retried for up to a
// third of AckWait (the job has no progress yet while it is read). A job
// with none (or only an earlier job's under its id) has an empty one. The
// first delivery of the shared consumer never has one and is answered
// without a round trip; a worker's own consumer may have been removed and
// restored, counting from 1 again, so its deliveries always read it.
func (d *Delivery) Record(ctx context.Context) (RunRecord, error) {
	empty := RunRecord{Seq: d.Seq}
	if d.Job.Attempt <= 1 && !d.routed {
		return empty, nil
	}
	r := empty
	err := retry(ctx, d.settleWithin()/3, func(ctx context.Context) error {
		kv, err := d.conn.attemptsKV(ctx)
		if err != nil {
			return err
		}
		e, err := kv.Get(ctx, d.Job.ID)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the run record of %s: %w", d.Job.ID, err)
		}
		var got RunRecord
		if json.Unmarshal(e.Value(), &got) == nil && got.Seq == d.Seq {
			r = got // else unreadable, or another job's
		}
		return nil
	})
	if err != nil {
		return empty, err
	}
	return r, nil
}

// PutRecord writes the run record of the delivered job, retried until
// AckWait passes.
func (d *Delivery) PutRecord(ctx context.Context, r RunRecord) error {
	return retry(ctx, d.settleWithin(), func(ctx context.Context) error { return d.putRecord(ctx, r) })
}

// putRecord is one write of the run record, under ctx's bound.
func (d *Delivery) putRecord(ctx context.Context, r RunRecord) error {
	r.Seq = d.Seq
	kv, err := d.conn.attemptsKV(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, d.Job.ID, b); err != nil {
		return fmt.Errorf("write the run record of %s: %w", d.Job.ID, err)
	}
	return nil
}

// Gone reports whether an earlier delivery of the job finished it: its
// result is in the results store, stored since the job was queued, or
// its message has left its stream (a work queue removes what is acked).
// A delivery handed out while that one was cut off from NATS must then
// not run again. A routed delivery's stream is not looked at.
func (d *Delivery) Gone(ctx context.Context) (bool, error) {
	if d.Job.ID != "" {
		info, err := d.conn.results.GetInfo(ctx, d.Job.ID)
		if err == nil && !info.Deleted && info.Metadata[HeaderStatus] != StatusErr && !info.ModTime.Before(d.Queued) {
			return true, nil
		}
	}
	if d.routed || d.Seq == 0 {
		return false, nil
	}
	st, err := d.conn.js.Stream(ctx, d.Class.Stream())
	if err != nil {
		return false, err
	}
	_, err = st.GetMsg(ctx, d.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true, nil
	}
	return false, err
}
