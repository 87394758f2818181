package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/genq/genq/internal/genq"
)

// Bounds of one publish. A PubAck can be lost (the connection drops after
// the server stored the job, say): each wait for it is bounded, and the same
// message is published again; its Nats-Msg-Id makes the server keep one.
// When NATS stays down past publishGiveUp, the caller gets Unavailable
// rather than waiting out its whole deadline.
const (
	pubAckWait    = 2 * time.Second
	publishGiveUp = 10 * time.Second
)

var errNotConnected = errors.New("not connected to NATS")

// Publish queues job. It does not wait for a result. duplicate reports that
// a job of the same id was already queued within the dedup window, so this
// one was dropped. opts pick the job's class (AsBatch); it is interactive by
// default.
func (c *Conn) Publish(ctx context.Context, job genq.Job, opts ...PublishOption) (duplicate bool, err error) {
	return c.publish(ctx, job, applyPublishOptions(opts).class, "", pubAckWait, publishGiveUp, false)
}

// publish queues job on subject, or on its class's shared subject when
// subject is "". receipt says the producer confirms the replies it takes
// (HeaderReceipt).
func (c *Conn) publish(ctx context.Context, job genq.Job, class Class, subject string, ackWait, giveUp time.Duration, receipt bool) (bool, error) {
	data, err := json.Marshal(job)
	if err != nil {
		return false, genq.WrapError(genq.Internal, err, "could not encode the job")
	}
	routed := subject != ""
	if !routed {
		subject = class.Subject(job.Variant)
	}
	msg := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: data}
	msg.Header.Set(HeaderMsgID, job.ID)
	if receipt {
		msg.Header.Set(HeaderReceipt, "1")
	}
	share, shared := genq.ShareOf(ctx)
	if shared {
		if err := c.shareMsg(ctx, msg, job, class, routed, share); err != nil {
			return false, err
		}
	}
	ctx, span := startPublish(ctx, job, class, msg.Subject, msg.Header)
	ack, err := c.publishMsg(ctx, msg, ackWait, giveUp)
	if err != nil {
		endSpan(span, err)
		return false, err
	}
	span.SetAttributes(attribute.Bool("genq.duplicate", ack.Duplicate), attribute.Int64("genq.stream.seq", int64(ack.Sequence)))
	span.End()
	if shared || class == Interactive {
		// Best effort: a lost ring costs an idle worker tenantCheckEvery.
		// An interactive job of no tenant rings too: beside tenants' jobs
		// idle workers wait for the bell, not in a pull on its subject. A
		// batch producer of no tenant (genqctl submit) may not ring.
		_ = c.nc.Publish(BellSubject(job.Variant), []byte(class.String()+" "+share.Tenant))
	}
	return ack.Duplicate, nil
}

// publishMsg publishes msg, which must carry a Nats-Msg-Id, until the
// server acknowledges it, refuses it, or giveUp passes.
func (c *Conn) publishMsg(ctx context.Context, msg *nats.Msg, ackWait, giveUp time.Duration) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, giveUp)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		// While the connection is down, a publish would sit in the
		// reconnect buffer and reach the server after the caller was told
		// 503: a job queued for nobody. Wait for the connection instead.
		err := errNotConnected
		if c.nc.IsConnected() {
			actx, acancel := context.WithTimeout(ctx, ackWait)
			var ack *jetstream.PubAck
			ack, err = c.js.PublishMsg(actx, msg)
			acancel()
			if err == nil {
				return ack, nil
			}
		}
		perr := publishError(err)
		if genq.ErrorCode(perr) == genq.Overloaded || errors.Is(err, nats.ErrConnectionClosed) {
			return nil, perr
		}
		c.log.Debug("publish not acknowledged; publishing again", "msg_id", msg.Header.Get(HeaderMsgID), "err", err)
		select {
		case <-ctx.Done():
			return nil, genq.WrapError(genq.Unavailable, errors.Join(err, ctx.Err()), "the queue is unavailable; retry later")
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// publishError maps JetStream's refusals to genq codes: a full queue (the
// stream's per-subject limit with DiscardNew) is the caller's cue to back
// off; anything else means NATS is not serving.
func publishError(err error) error {
	if err == nil {
		return nil
	}
	// 10077 is JetStream's "could not store the message": with the jobs
	// stream's DiscardNew per subject, the variant's queue is full.
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrStoreFailed || strings.Contains(apiErr.Description, "maximum messages per subject")) {
		return genq.WrapError(genq.Overloaded, err, "the queue is full; retry later")
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return genq.WrapError(genq.Unavailable, err, "the queue did not accept the job in time")
	}
	return genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
}

// jsErrStoreFailed is the JetStream error code of a message the stream
// would not store.
const jsErrStoreFailed = 10077

// PublishWakeup puts a wake-up signal on the variant's subject, so the queue
// shows lag and an autoscaler starts a worker. The id makes every api
// replica's signal of the same 10-second window count once.
func (c *Conn) PublishWakeup(ctx context.Context, v genq.Variant, now time.Time) error {
	msg := &nats.Msg{Subject: JobsSubject(v), Header: nats.Header{}}
	msg.Header.Set(HeaderKind, KindWakeup)
	msg.Header.Set(HeaderMsgID, fmt.Sprintf("wakeup-%s-%d", v, now.Unix()/10))
	_, err := c.publishMsg(ctx, msg, pubAckWait, publishGiveUp)
	return err
}

// PublishOption adjusts one publish.
type PublishOption func(*publishOptions)

type publishOptions struct {
	class Class
}

// AsBatch queues the job as a batch job: on its own, larger capacity, run
// only when no interactive job of its variant is waiting. For producers
// nobody waits on synchronously (genqctl submit, async job routes).
func AsBatch() PublishOption { return WithClass(Batch) }

// WithClass queues the job in class c; the default is Interactive.
func WithClass(c Class) PublishOption {
	return func(o *publishOptions) { o.class = c }
}

func applyPublishOptions(opts []PublishOption) publishOptions {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
