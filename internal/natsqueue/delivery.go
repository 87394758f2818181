package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Delivery is one job message handed to a worker.
type Delivery struct {
	msg     jetstream.Msg
	conn    *Conn
	variant genq.Variant // of the consumer it came from: a malformed Job may name none
	// Job is the decoded job; Job.Attempt is this delivery's number.
	Job genq.Job
	// Class is the class of the consumer it came from.
	Class Class
	// Source says whether it came from the shared consumer, the worker's
	// own, or another worker's.
	Source Source
	// Wakeup marks a wake-up signal: it carries no job and is only acked.
	Wakeup bool
	// Malformed is set when the body could not be decoded; Job.ID may be empty.
	Malformed error
	// Last is set on the last delivery the consumer makes of the message:
	// handed back, it would never come again, and its caller would wait
	// for nothing.
	Last bool
	// Queued is when the stream stored the message.
	Queued time.Time
	// Seq is the message's stream sequence: it tells this job from an
	// earlier one under the same id.
	Seq uint64
	// Data is the raw message body, kept for dead letters.
	Data []byte
	// routed: it came from a worker's own consumer, which a sweep may have
	// removed and restored, counting its deliveries afresh.
	routed bool
	// receipt: its producer confirms the replies it takes (HeaderReceipt).
	receipt bool
	// Tenant, Weight and Cost are what the message says of the job's
	// share (HeaderTenant, HeaderWeight, HeaderCost): "", 0 and 0 for a
	// job of no tenant.
	Tenant string
	Weight float64
	Cost   int64
	// charged corrects the tenant's fair share once the real cost is
	// known; nil when nothing was charged.
	charged func(real int64)
	// room is the headroom that counts the slot this delivery holds, as
	// a job of roomTenant, until Puller.Settled; nil: none.
	room       *headroom
	roomTenant string

	progressMu   sync.Mutex
	lastProgress time.Time
}

// Source is which consumer a delivery came from.
type Source string

const (
	// FromShared: the variant's shared consumer of its class.
	FromShared Source = "shared"
	// FromOwn: the worker's own consumer, of jobs routed to it.
	FromOwn Source = "own"
	// FromStolen: another worker's own consumer, whose job waited too long.
	FromStolen Source = "stolen"
	// FromTenant: a tenant's consumer of its class (fair share).
	FromTenant Source = "tenant"
)

// InProgress tells JetStream the job is alive, resetting its AckWait.
func (d *Delivery) InProgress() error { return d.Touch(true) }

// Touch tells JetStream the job is alive; unless forced, at most once a
// second. It is safe for concurrent use.
func (d *Delivery) Touch(force bool) error {
	d.progressMu.Lock()
	defer d.progressMu.Unlock()
	if !force && time.Since(d.lastProgress) < time.Second {
		return nil
	}
	d.lastProgress = time.Now()
	return d.msg.InProgress()
}

// markTimeout bounds a write that is not a settle (a running mark).
const markTimeout = 5 * time.Second

// settleContext is ctx's values with a fresh timeout: an ack or a dead
// letter must leave even when the job's own context has ended (a drain's
// grace period over, say), or the job is run again.
func settleContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// settleWithin is how long a settle is retried: the consumer's AckWait,
// after which the server hands the job to another worker anyway.
func (d *Delivery) settleWithin() time.Duration { return d.conn.Settings().AckWait }

// The bodies of the acknowledgements a worker sends (JetStream's ack
// protocol).
var (
	ackBody  = []byte("+ACK")
	termBody = []byte("+TERM")
)

// confirm sends one acknowledgement of kind body and waits for the
// server's answer. The server answers a repeated ack too, so a try whose
// answer was lost can be made again.
func (d *Delivery) confirm(ctx context.Context, body []byte) error {
	if _, err := d.conn.nc.RequestWithContext(ctx, d.msg.Reply(), body); err != nil {
		return fmt.Errorf("%s: %w", body, err)
	}
	return nil
}

// Ack removes the job from the queue, waiting for the server to confirm.
// A refused or unanswered ack is tried again until AckWait passes. Once one
// try went unanswered the ack may have landed or not, and NATS cannot say:
// the run record then says the job finished (RunRecord.Finished), so a
// redelivery is settled without running it again.
func (d *Delivery) Ack(ctx context.Context) error {
	tctx, cancel := settleContext(ctx, settleTry)
	err := d.confirm(tctx, ackBody)
	cancel()
	if err == nil {
		return nil
	}
	d.conn.log.Warn("ack not confirmed; trying again", "job_id", d.Job.ID, "err", err)
	recorded := d.Wakeup || d.Job.ID == ""
	return retryEach(context.WithoutCancel(ctx), d.settleWithin(), 2*settleTry, func(ctx context.Context) error {
		if !recorded {
			rctx, cancel := context.WithTimeout(ctx, settleTry)
			err := d.putRecord(rctx, RunRecord{Finished: d.Job.Attempt})
			cancel()
			if err != nil {
				d.conn.log.Warn("could not record the job as finished yet", "job_id", d.Job.ID, "err", err)
			} else {
				recorded = true
			}
		}
		return d.confirm(ctx, ackBody)
	})
}

// term ends the job for good, retried like Ack until the server confirms.
func (d *Delivery) term(ctx context.Context) error {
	return retrySettle(ctx, d.settleWithin(), func(ctx context.Context) error { return d.confirm(ctx, termBody) })
}

// Retry hands the job back for another delivery after delay.
func (d *Delivery) Retry(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// Release hands the job back at once, for another worker to run.
func (d *Delivery) Release() error { return d.msg.Nak() }

// Drop ends the job without a word to its caller: it is never delivered
// again. For a job whose caller has gone away.
func (d *Delivery) Drop(ctx context.Context) error { return d.term(ctx) }

// MarkRunning writes the running mark of a job that asked for a stored
// result, so a producer that answers for it by id (the api's GET
// /v1/jobs/{id}) can tell a started job from a queued one. It is one
// JetStream publish to the bucket's subject, with no bucket lookup: when
// no api created GENQ_JOB_RECORDS (a pipeline's jobs), the publish finds
// no stream and the mark is skipped. Interactive jobs never ask for one.
func (d *Delivery) MarkRunning(ctx context.Context) error {
	return d.markRunning(ctx, nil)
}

// MarkProgress writes how far a running job has got into its running mark
// (the api's GET /v1/jobs/{id} shows it), as MarkRunning writes the mark.
func (d *Delivery) MarkProgress(ctx context.Context, p genq.Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return d.markRunning(ctx, b)
}

func (d *Delivery) markRunning(ctx context.Context, value []byte) error {
	if !d.Job.Store {
		return nil
	}
	ctx, cancel := settleContext(ctx, markTimeout)
	defer cancel()
	// Without GENQ_JOB_RECORDS (no api made it: genqctl submit's jobs)
	// nobody reads the mark. A publish nobody answers is tried again twice,
	// 250 ms apart, by default: that was half a second before every such
	// job ran, and a batch on a 4-slot worker ran 6 jobs a second.
	_, err := d.conn.js.Publish(ctx, "$KV."+JobRecordsBucket+"."+d.Job.ID+runningSuffix, value, jetstream.WithRetryAttempts(0))
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark job %s running: %w", d.Job.ID, err)
	}
	return nil
}

// CallerGone reports whether the job's caller said it no longer waits for
// the reply (WaitingSubject): it had it from an earlier run, or gave up.
// False when the job has no caller to ask, or none answers within a
// second (a caller gone with its process, or one too old to answer): the
// job then runs, as it always did.
func (d *Delivery) CallerGone(ctx context.Context) bool {
	if d.Job.ReplyTo == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := d.conn.nc.RequestWithContext(ctx, WaitingSubject(d.Job.ReplyTo), nil)
	return err == nil && string(m.Data) == "no"
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
	err := retrySettle(ctx, d.settleWithin()/3, func(ctx context.Context) error {
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
	return retrySettle(ctx, d.settleWithin(), func(ctx context.Context) error { return d.putRecord(ctx, r) })
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

// Chunks returns the writer for the job's text, or nil when the job does
// not stream or has no reply subject the worker may publish to.
func (d *Delivery) Chunks() *ChunkWriter {
	if !d.Job.Stream || d.Job.ReplyTo == "" || !d.conn.ReplyAllowed(d.Job.ReplyTo) {
		return nil
	}
	return &ChunkWriter{conn: d.conn, subject: d.Job.ReplyTo, jobID: d.Job.ID, attempt: strconv.Itoa(d.Job.Attempt)}
}

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
	if err := d.conn.deliver(ctx, d.Job, res.Data, h, d.receipt); err != nil {
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
	body, _ := json.Marshal(errorBody{Code: genq.ErrorCode(reason), Error: genq.ErrorMessage(reason), Field: genq.ErrorField(reason)})
	h := nats.Header{}
	h.Set(HeaderJobID, d.Job.ID)
	h.Set(HeaderStatus, StatusErr)
	h.Set(HeaderErrorCode, string(genq.ErrorCode(reason)))
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderContentType, "application/json")
	if err := d.conn.deliver(ctx, d.Job, body, h, d.receipt); err != nil {
		d.conn.log.Warn("could not deliver the error reply", "job_id", d.Job.ID, "attempt", d.Job.Attempt, "err", err)
	}
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
	err := retrySettle(ctx, d.settleWithin(), func(ctx context.Context) error {
		_, err := d.conn.js.PublishMsg(ctx, &nats.Msg{Subject: DeadSubject(d.variant), Header: h, Data: d.Data})
		return err
	})
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", d.Job.ID, err)
	}
	return nil
}

// SettleCost tells the fair share what the job really took, in tokens
// (its prompt's and its answer's), in place of the estimate it was charged
// when pulled. A job of no tenant, or one not pulled by fair share, has
// nothing to settle.
func (d *Delivery) SettleCost(tokens int64) {
	if d.charged != nil {
		d.charged(tokens)
		d.charged = nil
	}
}
