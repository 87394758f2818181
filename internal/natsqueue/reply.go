package natsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// ReplyMeta is what the worker says about a run besides its result.
type ReplyMeta struct {
	Worker    string
	QueueWait time.Duration
	RunTime   time.Duration
}

// ErrUnsettled marks an outcome that did not happen because NATS did not
// take the result or the dead letter: the job is still held by this worker,
// which should hand it back with Retry. Better redelivered than lost.
var ErrUnsettled = errors.New("the job is not settled")

// Complete delivers res to the job's caller and into the results store, then
// acks the job. The ack waits for the result to be safe, so a lost result
// means a redelivery, never a silent loss. An error wrapping ErrUnsettled
// says the result did not get through and the job was not acked; any other
// error is the ack's, after the result was safe.
func (d *Delivery) Complete(ctx context.Context, res genq.Result, meta ReplyMeta) error {
	h := nats.Header{}
	h.Set(HeaderJobID, d.Job.ID)
	h.Set(HeaderStatus, StatusOK)
	h.Set(HeaderContentType, res.ContentType)
	h.Set(HeaderSize, strconv.Itoa(len(res.Data)))
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderQueueWaitMs, strconv.FormatInt(meta.QueueWait.Milliseconds(), 10))
	h.Set(HeaderRunMs, strconv.FormatInt(meta.RunTime.Milliseconds(), 10))
	if err := d.conn.deliver(ctx, d.Job, res.Data, h); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsettled, err)
	}
	return d.Ack(ctx)
}

// Fail tells the job's caller why the job failed and ends it: it is never
// delivered again. Telling is best effort; a lost error reply is logged and
// the caller ends at its deadline. The error is the termination's.
func (d *Delivery) Fail(ctx context.Context, reason error, meta ReplyMeta) error {
	d.replyError(ctx, reason, meta)
	return d.term(ctx)
}

// GiveUp copies the job to the dead-letter stream with reason, for an
// operator to inspect or replay, tells its caller, and ends it. The dead
// letter comes first, so a caller that has its answer can find the job
// there. An error wrapping ErrUnsettled says the dead letter was not
// written and the job is still held.
func (d *Delivery) GiveUp(ctx context.Context, reason error, meta ReplyMeta) error {
	if err := d.deadLetter(ctx, reason); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsettled, err)
	}
	if d.Job.ID != "" { // a malformed message may name no caller
		d.replyError(ctx, reason, meta)
	}
	return d.term(ctx)
}

// SettleCancelled ends a job whose caller cancelled it: it is never delivered
// again, and its outcome, canceled, is stored under its id, so a producer
// can tell its cancel took effect. Nobody waits for a reply.
func (d *Delivery) SettleCancelled(ctx context.Context, meta ReplyMeta) error {
	body, _ := json.Marshal(errorBody{Code: genq.Canceled, Error: "the job was cancelled by its caller"})
	h := nats.Header{}
	h.Set(HeaderStatus, StatusErr)
	h.Set(HeaderErrorCode, string(genq.Canceled))
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderContentType, "application/json")
	if err := d.conn.store(ctx, d.Job, body, h, d.settleWithin()); err != nil {
		d.conn.log.Warn("could not store the cancelled outcome", "job_id", d.Job.ID, "err", err)
	}
	return d.term(ctx)
}

// replyError delivers a failure to the job's caller and into the store.
func (d *Delivery) replyError(ctx context.Context, reason error, meta ReplyMeta) {
	body, _ := json.Marshal(errorBody{Code: genq.ErrorCode(reason), Error: genq.ErrorMessage(reason)})
	h := nats.Header{}
	h.Set(HeaderJobID, d.Job.ID)
	h.Set(HeaderStatus, StatusErr)
	h.Set(HeaderErrorCode, string(genq.ErrorCode(reason)))
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderContentType, "application/json")
	if err := d.conn.deliver(ctx, d.Job, body, h); err != nil {
		d.conn.log.Warn("could not deliver the error reply", "job_id", d.Job.ID, "attempt", d.Job.Attempt, "err", err)
	}
}

// storeFloor is the least time a result's store is retried for, however
// little of its job's time is left: a result that was ready in time is
// worth storing.
const storeFloor = 10 * time.Second

// storeWithin is how long the result of job is tried in the store: the
// job's remaining time, at least storeFloor.
func storeWithin(job genq.Job, now time.Time) time.Duration {
	if job.Deadline.IsZero() {
		return storeFloor
	}
	return max(job.Deadline.Sub(now), storeFloor)
}

// deliver gets a result to the job's caller and into the results store.
//
// Every result is stored. A reply is a core NATS message, lost if its
// caller happens to be disconnected (during a NATS restart, say); the
// stored copy is where the caller recovers it after reconnecting. A small
// result is replied first, so storing it adds nothing to its latency; a
// large one is stored first, because its reply only names it.
//
// A reply_to outside the allowed prefixes (ReplyAllowed) gets nothing: the
// result is stored only, where its producer can fetch it. The producer
// chose the subject, so it is not logged; the job id is enough to find it.
func (c *Conn) deliver(ctx context.Context, job genq.Job, data []byte, h nats.Header) error {
	if job.ReplyTo != "" && !c.ReplyAllowed(job.ReplyTo) {
		c.log.Warn("reply_to is outside the allowed prefixes (NATS_REPLY_PREFIXES); storing the result only", "job_id", job.ID)
		job.ReplyTo = "" // and a store that fails is an error: nobody heard a reply
	}
	within := storeWithin(job, time.Now())
	if len(data) > c.inlineLimit() {
		if err := c.store(ctx, job, data, h, within); err != nil {
			return err
		}
		if job.ReplyTo != "" {
			h.Set(HeaderObject, job.ID)
			c.reply(job, &nats.Msg{Subject: job.ReplyTo, Header: h}, nil)
		}
		return nil
	}
	var replyErr error
	if job.ReplyTo != "" {
		replyErr = c.publishReply(&nats.Msg{Subject: job.ReplyTo, Header: h, Data: data})
	}
	if err := c.store(ctx, job, data, h, within); err != nil {
		if replyErr == nil && job.ReplyTo != "" && !job.Store {
			c.log.Warn("result replied but not stored", "job_id", job.ID, "err", err)
			return nil
		}
		return errors.Join(replyErr, err)
	}
	if replyErr != nil {
		c.reply(job, &nats.Msg{Subject: job.ReplyTo, Header: h, Data: data}, replyErr)
	}
	return nil
}

// reply sends m, the reply of a job whose result is stored, once more if
// it fails (first, when not nil, is a failure already seen). A reply that
// failed because this worker's server died is gone, and its caller, still
// connected to another server, has no reason to look in the store: the
// store going through shows that the connection is back, so a second try
// reaches it. A caller that gets the reply twice keeps the first.
func (c *Conn) reply(job genq.Job, m *nats.Msg, first error) {
	err := first
	if err == nil {
		if err = c.publishReply(m); err == nil {
			return
		}
	}
	if err := c.publishReply(m); err != nil {
		c.log.Warn("reply lost; the caller can fetch the stored result", "job_id", job.ID, "err", err)
		return
	}
	c.log.Info("reply sent again after a failure", "job_id", job.ID, "err", err)
}

// publishReply sends a reply and flushes it, so that a worker acks a job
// only once its reply has left for the server.
func (c *Conn) publishReply(m *nats.Msg) error {
	if err := c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("publish reply: %w", err)
	}
	if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("flush reply: %w", err)
	}
	return nil
}

// storeTry bounds one Put of a result. A Put whose chunks' PubAcks were
// lost with the results store's old leader would otherwise wait out its
// whole context although a new leader answers seconds later; a fresh Put
// reaches it.
const storeTry = 3 * time.Second

// storeTryPerMiB lengthens the bound of one Put for a large result, whose
// chunks take their time to cross.
const storeTryPerMiB = 125 * time.Millisecond

// store puts the result of job in the results store, each Put bounded by
// c.storeTry and the result's size, retried until one succeeds or within
// passes.
func (c *Conn) store(ctx context.Context, job genq.Job, data []byte, h nats.Header, within time.Duration) error {
	meta := jetstream.ObjectMeta{Name: job.ID, Metadata: map[string]string{}}
	for _, k := range []string{HeaderStatus, HeaderContentType, HeaderAttempt, HeaderWorker, HeaderErrorCode} {
		if v := h.Get(k); v != "" {
			meta.Metadata[k] = v
		}
	}
	tries := 0
	each := c.storeTry + time.Duration(len(data)>>20)*storeTryPerMiB
	err := retryEach(context.WithoutCancel(ctx), within, each, func(ctx context.Context) error {
		tries++
		_, err := c.results.Put(ctx, meta, bytes.NewReader(data))
		if err != nil {
			c.log.Debug("result not stored yet; trying again", "job_id", job.ID, "try", tries, "err", err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store result of %s (%d tries): %w", job.ID, tries, err)
	}
	if tries > 1 {
		c.log.Info("result stored after retries", "job_id", job.ID, "tries", tries)
	}
	return nil
}

// deadLetter copies the job's message to the dead-letter stream of its
// variant, with the reason, retried until AckWait passes. Its message id
// makes the stream keep one copy however many tries landed.
func (d *Delivery) deadLetter(ctx context.Context, reason error) error {
	h := nats.Header{}
	h.Set(HeaderJobID, d.Job.ID)
	h.Set(HeaderErrorCode, string(genq.ErrorCode(reason)))
	h.Set("Genq-Error", reason.Error())
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	h.Set(HeaderMsgID, fmt.Sprintf("dead-%s-%d", d.variant, d.Seq))
	err := retry(ctx, d.settleWithin(), func(ctx context.Context) error {
		_, err := d.conn.js.PublishMsg(ctx, &nats.Msg{Subject: DeadSubject(d.variant), Header: h, Data: d.Data})
		return err
	})
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", d.Job.ID, err)
	}
	return nil
}
