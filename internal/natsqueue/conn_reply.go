package natsqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

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
// A producer that confirms replies (receipt, HeaderReceipt) gets a small
// one as a request: confirmed taken, the result of a job without store is
// not stored, which spares a store and the producer's delete of it, the
// most of what NATS does for a small job. Unconfirmed, it is stored as
// any other, and once stored it is sent again: the request may have died
// with this worker's server (frozen, say) while the producer stayed
// connected to another, and such a producer has no reason to look in the
// store.
//
// A reply_to outside the allowed prefixes (ReplyAllowed) gets nothing: the
// result is stored only, where its producer can fetch it. The producer
// chose the subject, so it is not logged; the job id is enough to find it.
func (c *Conn) deliver(ctx context.Context, job genq.Job, data []byte, h nats.Header, receipt bool) error {
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
	unheard := false // sent, but no answer says the producer had it
	switch {
	case job.ReplyTo != "" && receipt && !job.Store:
		answer, err := c.replyTaken(ctx, &nats.Msg{Subject: job.ReplyTo, Header: h, Data: data})
		if answer == receiptTaken {
			return nil
		}
		replyErr, unheard = err, err == nil && answer == receiptNone
	case job.ReplyTo != "":
		replyErr = c.publishReply(&nats.Msg{Subject: job.ReplyTo, Header: h, Data: data})
	}
	if err := c.store(ctx, job, data, h, within); err != nil {
		if replyErr == nil && job.ReplyTo != "" && !job.Store {
			c.log.Warn("result replied but not stored", "job_id", job.ID, "err", err)
			return nil
		}
		return errors.Join(replyErr, err)
	}
	switch {
	case replyErr != nil:
		c.reply(job, &nats.Msg{Subject: job.ReplyTo, Header: h, Data: data}, replyErr)
	case unheard:
		c.log.Info("reply not confirmed; sending it again now that the result is stored", "job_id", job.ID)
		c.reply(job, &nats.Msg{Subject: job.ReplyTo, Header: h, Data: data}, nil)
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

// receiptWait bounds the wait for a producer's confirmation of a reply: a
// producer that is paused or cut off gets its result from the store.
const receiptWait = time.Second

// receiptAnswer is what a producer said to a reply sent as a request.
type receiptAnswer int

const (
	// receiptNone: no answer within receiptWait, or no responders. The
	// reply may be lost on its way (this worker's server froze with it),
	// or its producer may be gone.
	receiptNone receiptAnswer = iota
	// receiptTaken: a caller that waited had it.
	receiptTaken
	// receiptRefused: the producer had it, and nobody waited for it.
	receiptRefused
)

// replyTaken sends m as a request and says what its producer answered.
// The error says m could not be sent; a request unanswered, or answered
// by nobody, did leave for the server, as a published reply does.
func (c *Conn) replyTaken(ctx context.Context, m *nats.Msg) (receiptAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, receiptWait)
	defer cancel()
	resp, err := c.nc.RequestMsgWithContext(ctx, m)
	switch {
	case err == nil && string(resp.Data) == ReceiptTaken:
		return receiptTaken, nil
	case err == nil:
		return receiptRefused, nil
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		c.log.Debug("reply not confirmed; storing the result", "job_id", m.Header.Get(HeaderJobID), "err", err)
		return receiptNone, nil
	}
	return receiptNone, fmt.Errorf("publish reply: %w", err)
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

// ReplyAllowed reports whether a worker may publish a job's reply to
// subject. A job's reply_to is whatever its producer wrote, and the worker
// publishes with its own NATS rights: without a bound, any producer could
// make workers publish on subjects it may not use itself (another
// producer's inbox, say). With no prefixes configured any subject is
// allowed, as on an open server. A prefix matches whole tokens only:
// "_INBOX_api" allows "_INBOX_api.x", never "_INBOX_apix.y".
func (c *Conn) ReplyAllowed(subject string) bool {
	if len(c.replyPrefixes) == 0 {
		return true
	}
	for _, p := range c.replyPrefixes {
		p = strings.TrimSuffix(p, ".")
		if strings.HasPrefix(subject, p+".") && !strings.ContainsAny(subject, "*> \t") {
			return true
		}
	}
	return false
}

// splitPrefixes reads a comma-separated list of subject prefixes.
func splitPrefixes(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
