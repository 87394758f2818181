package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	progressMu   sync.Mutex
	lastProgress time.Time
}

// Puller pulls the jobs of one variant, interactive ones before batch ones.
// It is safe for concurrent use: every slot of a worker shares one.
type Puller struct {
	conn    *Conn
	variant genq.Variant
	// queues in the order they are served: interactive, then batch.
	queues [2]pullQueue
	// own and thief are set when the worker takes routed jobs
	// (NewRoutedPuller): own is served before queues, thief after the
	// interactive one.
	own   *ownQueue
	thief *stealer
}

// pullQueue is the durable consumer of one class.
type pullQueue struct {
	class    Class
	consumer jetstream.Consumer
	// maxDeliver is the consumer's delivery limit; 0 or less: none.
	maxDeliver int
	source     Source
	// routed: a worker's own consumer (see Delivery.routed).
	routed bool
}

// batchCheckEvery bounds how long an idle Next waits on the interactive
// consumer alone before it looks at the batch consumer again: the delay a
// batch job may see on an idle worker, and an idle slot's rate of pull
// requests (two per period).
const batchCheckEvery = 500 * time.Millisecond

// NewPuller binds the variant's durable consumers.
func (c *Conn) NewPuller(ctx context.Context, v genq.Variant) (*Puller, error) {
	p := &Puller{conn: c, variant: v}
	for i, class := range []Class{Interactive, Batch} {
		cons, err := c.js.Consumer(ctx, class.Stream(), class.Consumer(v))
		if err != nil {
			return nil, fmt.Errorf("bind consumer %s: %w", class.Consumer(v), err)
		}
		p.queues[i] = pullQueue{class: class, consumer: cons, source: FromShared}
		if info := cons.CachedInfo(); info != nil {
			p.queues[i].maxDeliver = info.Config.MaxDeliver
		}
	}
	return p, nil
}

// Next asks for one job and waits up to wait for it. It returns nil, nil when
// none came. One call holds at most one pull request for one message at a
// time: a worker with k free slots keeps k calls outstanding, so it never
// holds a job it cannot run.
//
// The priority rule: each call first asks the interactive consumer, then
// the batch consumer, without waiting; a batch job is taken only when no
// interactive job was waiting. With nothing waiting, it waits on the
// interactive consumer only, batchCheckEvery at a time, and asks the batch
// consumer again in between. It never waits on the batch consumer, so an
// interactive job waits for at most one running job per slot to end,
// however many batch jobs are queued.
//
// The pull takes no context on purpose: abandoning it midway could drop a
// message already on its way, which would then wait out AckWait.
//
// A worker that takes routed jobs asks its own consumer before the
// interactive one, and, with nothing in either, looks for a job another
// worker did not start in time before it asks the batch consumer; it waits
// on the interactive consumer ownCheckEvery at a time, and asks the batch
// consumer no more often than without routing.
func (p *Puller) Next(wait time.Duration) (*Delivery, error) { return p.next(wait, true) }

// NextInteractive is Next for a slot kept for interactive jobs: it never
// takes a batch job, so a worker that runs batch work in its other slots
// always has one free for a caller who waits.
func (p *Puller) NextInteractive(wait time.Duration) (*Delivery, error) { return p.next(wait, false) }

func (p *Puller) next(wait time.Duration, batchToo bool) (*Delivery, error) {
	interactive, batch := &p.queues[0], &p.queues[1]
	if d, err := p.interactiveNow(); d != nil || err != nil {
		return d, err
	}
	end := time.Now().Add(wait)
	slice := batchCheckEvery
	if p.own != nil {
		slice = ownCheckEvery
	}
	var batchChecked time.Time
	for {
		// At most every batchCheckEvery, however short the slice.
		if batchToo && time.Since(batchChecked) >= batchCheckEvery-slice/2 {
			batchChecked = time.Now()
			if d, err := p.fetch(batch, 0); d != nil || err != nil {
				return d, err
			}
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, nil
		}
		if d, err := p.fetch(interactive, min(left, slice)); d != nil || err != nil {
			return d, err
		}
		if p.own != nil {
			// The shared consumer was just asked; only the worker's own
			// and the other workers' remain.
			if d, err := p.preferred(); d != nil || err != nil {
				return d, err
			}
			if d := p.stolen(); d != nil {
				return d, nil
			}
		}
	}
}

// interactiveNow pulls an interactive job already waiting: the worker's own
// first, then the shared consumer's, then one due to be stolen.
func (p *Puller) interactiveNow() (*Delivery, error) {
	if d, err := p.preferred(); d != nil || err != nil {
		return d, err
	}
	if d, err := p.fetch(&p.queues[0], 0); d != nil || err != nil {
		return d, err
	}
	return p.stolen(), nil
}

// fetch pulls at most one message from q, waiting up to wait for it; with
// wait 0, only a message already waiting.
func (p *Puller) fetch(q *pullQueue, wait time.Duration) (*Delivery, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait > 0 {
		batch, err = q.consumer.Fetch(1, jetstream.FetchMaxWait(wait))
	} else {
		batch, err = q.consumer.FetchNoWait(1)
	}
	if err != nil {
		return nil, fmt.Errorf("pull %s jobs: %w", q.class, err)
	}
	var d *Delivery
	for m := range batch.Messages() {
		d = p.decode(q, m)
	}
	if d == nil {
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) &&
			!errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("pull %s jobs: %w", q.class, err)
		}
	}
	return d, nil
}

func (p *Puller) decode(q *pullQueue, m jetstream.Msg) *Delivery {
	d := &Delivery{msg: m, conn: p.conn, variant: p.variant, Class: q.class, Source: q.source, routed: q.routed, Data: m.Data()}
	if meta, err := m.Metadata(); err == nil {
		d.Job.Attempt = int(meta.NumDelivered)
		d.Queued = meta.Timestamp
		d.Seq = meta.Sequence.Stream
		d.Last = q.maxDeliver > 0 && d.Job.Attempt >= q.maxDeliver
	}
	if m.Headers().Get(HeaderKind) == KindWakeup {
		d.Wakeup = true
		return d
	}
	attempt := d.Job.Attempt
	d.Job, d.Malformed = decodeJob(m.Data(), p.variant)
	d.Job.Attempt = attempt
	return d
}

// decodeJob reads a job message body meant for variant v. On error the job
// holds whatever could be read, so a reply can still reach its caller.
func decodeJob(data []byte, v genq.Variant) (genq.Job, error) {
	var j genq.Job
	if err := json.Unmarshal(data, &j); err != nil {
		return genq.Job{}, fmt.Errorf("decode job: %w", err)
	}
	return j, validateJob(j, v)
}

func validateJob(j genq.Job, v genq.Variant) error {
	if err := j.Validate(); err != nil {
		return err
	}
	if j.Variant != v {
		return fmt.Errorf("job %s is for variant %q on the subject of variant %s", j.ID, j.Variant, v)
	}
	return nil
}

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

// settleTry bounds one wait for the server's confirmation of a settle (an
// ack, a term, a record or a store): short, because a confirmation lost
// with a server that died never comes, and the next try reaches the
// stream's new leader.
const settleTry = 2 * time.Second

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
	return retry(ctx, d.settleWithin(), func(ctx context.Context) error { return d.confirm(ctx, termBody) })
}

// Retry hands the job back for another delivery after delay.
func (d *Delivery) Retry(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// Release hands the job back at once, for another worker to run.
func (d *Delivery) Release() error { return d.msg.Nak() }

// Drop ends the job without a word to its caller: it is never delivered
// again. For a job whose caller has gone away.
func (d *Delivery) Drop(ctx context.Context) error { return d.term(ctx) }
