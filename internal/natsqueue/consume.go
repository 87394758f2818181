package natsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Delivery is one job message handed to a worker.
type Delivery struct {
	msg jetstream.Msg
	// Job is the decoded job; Job.Attempt is this delivery's number.
	Job genq.Job
	// Wakeup marks a wake-up signal: it carries no job and is only acked.
	Wakeup bool
	// Malformed is set when the body could not be decoded; Job.ID may be empty.
	Malformed error
	// Queued is when the stream stored the message.
	Queued time.Time
	// Data is the raw message body, kept for dead letters.
	Data []byte
}

// Puller pulls the jobs of one variant.
type Puller struct {
	conn     *Conn
	variant  genq.Variant
	consumer jetstream.Consumer
}

// NewPuller binds the variant's durable consumer.
func (c *Conn) NewPuller(ctx context.Context, v genq.Variant) (*Puller, error) {
	cons, err := c.js.Consumer(ctx, JobsStream, ConsumerName(v))
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s: %w", ConsumerName(v), err)
	}
	return &Puller{conn: c, variant: v, consumer: cons}, nil
}

// Next asks for one job and waits up to wait for it. It returns nil, nil when
// none came. One call is one pull request for one message: a worker with k
// free slots keeps k calls outstanding, so it never holds a job it cannot run.
//
// The pull takes no context on purpose: abandoning it midway could drop a
// message already on its way, which would then wait out AckWait.
func (p *Puller) Next(wait time.Duration) (*Delivery, error) {
	batch, err := p.consumer.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	var d *Delivery
	for m := range batch.Messages() {
		d = p.decode(m)
	}
	if d == nil {
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
	return d, nil
}

func (p *Puller) decode(m jetstream.Msg) *Delivery {
	d := &Delivery{msg: m, Data: m.Data()}
	if meta, err := m.Metadata(); err == nil {
		d.Job.Attempt = int(meta.NumDelivered)
		d.Queued = meta.Timestamp
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

// jobIDPattern is what the protocol allows in a job id: it becomes an
// object name and a key-value key.
var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func validateJob(j genq.Job, v genq.Variant) error {
	switch {
	case !jobIDPattern.MatchString(j.ID):
		return fmt.Errorf("job id %q: want 1 to 128 characters of A-Z, a-z, 0-9, - and _", j.ID)
	case j.Variant != v:
		return fmt.Errorf("job %s is for variant %q on the subject of variant %s", j.ID, j.Variant, v)
	case j.Text == "":
		return fmt.Errorf("job %s has no text", j.ID)
	}
	return nil
}

// InProgress tells JetStream the job is alive, resetting its AckWait.
func (d *Delivery) InProgress() error { return d.msg.InProgress() }

// Ack removes the job from the queue, waiting for the server to confirm so
// a lost ack cannot make a delivered job run again.
func (d *Delivery) Ack(ctx context.Context) error { return d.msg.DoubleAck(ctx) }

// Retry hands the job back for another delivery after delay.
func (d *Delivery) Retry(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// Release hands the job back at once, for another worker to run.
func (d *Delivery) Release() error { return d.msg.Nak() }

// Drop ends the job: it is never delivered again.
func (d *Delivery) Drop() error { return d.msg.Term() }

// ReplyMeta is what the worker says about a run besides its result.
type ReplyMeta struct {
	Worker    string
	QueueWait time.Duration
	RunTime   time.Duration
}

// Reply delivers a successful result to the job's caller and into the
// results store. It returns once the result is safe, so the caller can ack.
func (c *Conn) Reply(ctx context.Context, job genq.Job, res genq.Result, meta ReplyMeta) error {
	h := nats.Header{}
	h.Set(HeaderJobID, job.ID)
	h.Set(HeaderStatus, StatusOK)
	h.Set(HeaderContentType, res.ContentType)
	h.Set(HeaderSize, strconv.Itoa(len(res.Data)))
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderQueueWaitMs, strconv.FormatInt(meta.QueueWait.Milliseconds(), 10))
	h.Set(HeaderRunMs, strconv.FormatInt(meta.RunTime.Milliseconds(), 10))
	return c.deliver(ctx, job, res.Data, h)
}

// ReplyError delivers a failure to the job's caller and into the store.
func (c *Conn) ReplyError(ctx context.Context, job genq.Job, err error, meta ReplyMeta) error {
	body, _ := json.Marshal(errorBody{Code: genq.ErrorCode(err), Error: genq.ErrorMessage(err)})
	h := nats.Header{}
	h.Set(HeaderJobID, job.ID)
	h.Set(HeaderStatus, StatusErr)
	h.Set(HeaderErrorCode, string(genq.ErrorCode(err)))
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderWorker, meta.Worker)
	h.Set(HeaderContentType, "application/json")
	return c.deliver(ctx, job, body, h)
}

// storeTimeout bounds how long delivering a result may wait for NATS: long
// enough to ride out a server restart.
const storeTimeout = 30 * time.Second

// deliver gets a result to the job's caller and into the results store.
//
// Every result is stored. A reply is a core NATS message, lost if its
// caller happens to be disconnected (during a NATS restart, say); the
// stored copy is where the caller recovers it after reconnecting. A small
// result is replied first, so storing it adds nothing to its latency; a
// large one is stored first, because its reply only names it.
func (c *Conn) deliver(ctx context.Context, job genq.Job, data []byte, h nats.Header) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if len(data) > c.inlineLimit() {
		if err := c.store(ctx, job, data, h); err != nil {
			return err
		}
		if job.ReplyTo != "" {
			h.Set(HeaderObject, job.ID)
			if err := c.publishReply(&nats.Msg{Subject: job.ReplyTo, Header: h}); err != nil {
				c.log.Warn("reply lost; the caller can fetch the stored result", "job_id", job.ID, "err", err)
			}
		}
		return nil
	}
	var replyErr error
	if job.ReplyTo != "" {
		replyErr = c.publishReply(&nats.Msg{Subject: job.ReplyTo, Header: h, Data: data})
	}
	if err := c.store(ctx, job, data, h); err != nil {
		if replyErr == nil && job.ReplyTo != "" && !job.Store {
			c.log.Warn("result replied but not stored", "job_id", job.ID, "err", err)
			return nil
		}
		return errors.Join(replyErr, err)
	}
	if replyErr != nil {
		c.log.Warn("reply lost; the caller can fetch the stored result", "job_id", job.ID, "err", replyErr)
	}
	return nil
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

func (c *Conn) store(ctx context.Context, job genq.Job, data []byte, h nats.Header) error {
	meta := jetstream.ObjectMeta{Name: job.ID, Metadata: map[string]string{}}
	for _, k := range []string{HeaderStatus, HeaderContentType, HeaderAttempt, HeaderWorker, HeaderErrorCode} {
		if v := h.Get(k); v != "" {
			meta.Metadata[k] = v
		}
	}
	if _, err := c.results.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("store result of %s: %w", job.ID, err)
	}
	return nil
}

// DeadLetter copies a job that failed for good to the dead-letter stream,
// with the reason, for an operator to inspect or replay.
func (c *Conn) DeadLetter(ctx context.Context, v genq.Variant, d *Delivery, reason error) error {
	h := nats.Header{}
	h.Set(HeaderJobID, d.Job.ID)
	h.Set(HeaderErrorCode, string(genq.ErrorCode(reason)))
	h.Set("Genq-Error", reason.Error())
	h.Set(HeaderAttempt, strconv.Itoa(d.Job.Attempt))
	_, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: DeadSubject(v), Header: h, Data: d.Data})
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", d.Job.ID, err)
	}
	return nil
}

// CancelWatch knows which jobs their callers have cancelled: every key put
// in GENQ_CANCEL within its TTL (the job age limit). It answers from memory,
// so checking a job costs no round trip on its way to the model.
type CancelWatch struct {
	mu        sync.Mutex
	cancelled map[string]time.Time // job id → when it was cancelled
	ttl       time.Duration
}

// Cancelled reports whether the job's caller has cancelled it.
func (w *CancelWatch) Cancelled(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.cancelled[id]
	return ok
}

// add records a cancel and forgets those the bucket has expired, so memory
// stays bounded by the cancels of one TTL.
func (w *CancelWatch) add(id string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancelled[id] = at
	if len(w.cancelled)%1024 != 0 {
		return
	}
	for k, t := range w.cancelled {
		if time.Since(t) > w.ttl {
			delete(w.cancelled, k)
		}
	}
}

// WatchCancels follows GENQ_CANCEL until ctx ends. It returns once the
// cancels already in the bucket are known; from then on, a job cancelled at
// any time is either in Cancelled or, if the cancel comes later, passed to
// fn as it arrives. A worker that registers a job for fn before checking
// Cancelled therefore never misses a cancel.
func (c *Conn) WatchCancels(ctx context.Context, fn func(id string)) (*CancelWatch, error) {
	kw, err := c.cancels.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch cancels: %w", err)
	}
	cw := &CancelWatch{cancelled: map[string]time.Time{}, ttl: c.settings.MaxJobAge}
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		defer kw.Stop()
		defer once.Do(func() { close(synced) })
		initial := true
		for e := range kw.Updates() {
			if e == nil { // the end of the keys already there
				initial = false
				once.Do(func() { close(synced) })
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			cw.add(e.Key(), e.Created())
			if !initial {
				fn(e.Key())
			}
		}
	}()
	select {
	case <-synced:
		return cw, ctx.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, errors.New("watch cancels: NATS sent no cancels in a minute")
	}
}

// PublishWakeup puts a wake-up signal on the variant's subject, so the queue
// shows lag and an autoscaler starts a worker. The id makes every api
// replica's signal of the same 10-second window count once.
func (c *Conn) PublishWakeup(ctx context.Context, v genq.Variant, now time.Time) error {
	msg := &nats.Msg{Subject: JobsSubject(v), Header: nats.Header{}}
	msg.Header.Set(HeaderKind, KindWakeup)
	msg.Header.Set(HeaderMsgID, fmt.Sprintf("wakeup-%s-%d", v, now.Unix()/10))
	_, err := c.js.PublishMsg(ctx, msg)
	return publishError(err)
}
