package natsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// FetchResult returns a stored result by job id: the reply of a job that
// asked for Store, or whose result was too large to travel inline. It
// returns a genq.Error with code NotFound when no result is stored (yet).
func (c *Conn) FetchResult(ctx context.Context, id string) (*genq.ReceivedResult, error) {
	return c.fetchResult(ctx, id, false)
}

// fetchResult reads a stored result; with drop, closing its body after
// reading it whole deletes it.
func (c *Conn) fetchResult(ctx context.Context, id string, drop bool) (*genq.ReceivedResult, error) {
	obj, done, err := c.getResult(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, genq.Errorf(genq.NotFound, "no stored result for job %s", id)
	}
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the results store is unavailable")
	}
	info, err := obj.Info()
	if err != nil {
		obj.Close()
		done()
		return nil, genq.WrapError(genq.Unavailable, err, "the results store is unavailable")
	}
	if info.Metadata[HeaderStatus] == StatusErr {
		defer done()
		defer obj.Close()
		return nil, decodeErrorBody(obj)
	}
	return &genq.ReceivedResult{
		JobID: id, ContentType: info.Metadata[HeaderContentType], Size: int64(info.Size),
		Body:    &storedBody{ObjectResult: obj, drop: drop, conn: c, name: id, done: done},
		Attempt: atoiOr0(info.Metadata[HeaderAttempt]), Worker: info.Metadata[HeaderWorker],
	}, nil
}

// decodeReply turns a reply message into an Answer or a *genq.Error. When the
// bytes sit in the results store and drop is true, closing the body deletes
// them: nobody will fetch them again.
func (c *Conn) decodeReply(ctx context.Context, m *nats.Msg, drop bool) (*genq.ReceivedResult, error) {
	h := m.Header
	if h.Get(HeaderStatus) == StatusErr {
		return nil, decodeErrorBody(bytes.NewReader(m.Data))
	}
	r := &genq.ReceivedResult{
		JobID:       h.Get(HeaderJobID),
		ContentType: h.Get(HeaderContentType),
		QueueWait:   time.Duration(atoiOr0(h.Get(HeaderQueueWaitMs))) * time.Millisecond,
		RunTime:     time.Duration(atoiOr0(h.Get(HeaderRunMs))) * time.Millisecond,
		Attempt:     atoiOr0(h.Get(HeaderAttempt)),
		Worker:      h.Get(HeaderWorker),
	}
	name := h.Get(HeaderObject)
	if name == "" {
		r.Size = int64(len(m.Data))
		r.Body = io.NopCloser(bytes.NewReader(m.Data))
		return r, nil
	}
	obj, done, err := c.getResult(ctx, name)
	if err != nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the result could not be read from the results store")
	}
	r.Size, _ = strconv.ParseInt(h.Get(HeaderSize), 10, 64)
	r.Body = &storedBody{ObjectResult: obj, drop: drop, conn: c, name: name, done: done}
	return r, nil
}

// resultReadTimeout bounds the reading of one stored result. The reading
// does not stop at the caller's deadline: a result that was ready in time
// must arrive whole, not as a 200 cut short when the deadline passes while
// a large PNG is still streaming to a slow client.
const resultReadTimeout = 5 * time.Minute

// getResult opens the stored object name. ctx bounds the opening; the
// reading runs under its own timeout until done is called (the body's
// Close does it).
func (c *Conn) getResult(ctx context.Context, name string) (jetstream.ObjectResult, func(), error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultReadTimeout)
	stop := context.AfterFunc(ctx, cancel)
	obj, err := c.results.Get(rctx, name)
	if !stop() || err != nil {
		// ctx ended while the object was being opened.
		if err == nil {
			obj.Close()
			err = ctx.Err()
		}
		cancel()
		return nil, nil, err
	}
	return obj, cancel, nil
}

// storedBody deletes its object once it has been read whole and closed.
type storedBody struct {
	jetstream.ObjectResult
	drop bool
	conn *Conn
	name string
	eof  bool
	done func() // ends the reading's own context
}

func (b *storedBody) Read(p []byte) (int, error) {
	n, err := b.ObjectResult.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *storedBody) Close() error {
	err := b.ObjectResult.Close()
	b.done()
	if b.drop && b.eof {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if derr := b.conn.results.Delete(ctx, b.name); derr != nil {
			b.conn.log.Warn("could not delete a delivered result; its TTL will", "job_id", b.name, "err", derr)
		}
	}
	return err
}

func decodeErrorBody(r io.Reader) error {
	var body errorBody
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&body); err != nil || body.Code == "" {
		return genq.Errorf(genq.Internal, "the worker sent an error reply genq could not read")
	}
	return &genq.Error{Code: body.Code, Message: body.Error, Field: body.Field}
}

func atoiOr0(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// pollTimeout bounds one poll of the results store, so a poll stuck on a
// connection that is down does not outlast the next.
const pollTimeout = 5 * time.Second

func (c *Conn) pollResult(ctx context.Context, id string, drop bool) (*genq.ReceivedResult, error) {
	pctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	r, err := c.fetchResult(pctx, id, drop)
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		return nil, genq.WrapError(genq.Unavailable, err, "the results store did not answer in time")
	}
	return r, err
}

// dropDelay is how long a delivered result stays in the store before the
// producer deletes it: the worker stores it after replying, so an
// immediate delete could come first and miss.
const dropDelay = 5 * time.Second

// dropLater deletes a delivered result nobody will fetch again.
func (c *Conn) dropLater(id string) {
	time.AfterFunc(dropDelay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.results.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			c.log.Debug("could not delete a delivered result; its TTL will", "job_id", id, "err", err)
		}
	})
}
