package natsqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// cancelRetryFor is how long a cancel mark, or its withdrawal, that NATS
// did not take is tried again: long enough to ride out a NATS restart or a
// cluster's election.
const cancelRetryFor = time.Minute

// The values of a cancel mark. A cancelled job's mark counts for a copy of
// the job queued before it. An abandoned job's publish was never
// confirmed and its caller was told so: the mark counts for a copy queued
// at any time, since a PubAck lost with a frozen server can be followed by
// that server storing the job after the caller has gone.
var (
	markCancelled = []byte("cancelled")
	markAbandoned = []byte("abandoned")
)

// Cancel marks a job cancelled. It does not take the caller's ctx, which
// has usually ended already. It waits at most settleTry; a mark that did
// not land by then (NATS is down) is tried again in the background, since
// a job queued without its caller would otherwise run for nobody.
func (c *Conn) Cancel(id string) { c.mark(id, markCancelled) }

// Abandon marks a job whose publish was never confirmed, so that no copy
// of it runs, whenever it reaches the stream. The job's id must not be
// used again, unless its mark is withdrawn first (Uncancel).
func (c *Conn) Abandon(id string) { c.mark(id, markAbandoned) }

func (c *Conn) mark(id string, value []byte) {
	if c.putMark(id, value) == nil {
		return
	}
	go func() {
		for end := time.Now().Add(cancelRetryFor); time.Now().Before(end) && !c.nc.IsClosed(); {
			time.Sleep(time.Second)
			if c.putMark(id, value) == nil {
				return
			}
		}
		c.log.Warn("could not mark job cancelled", "job_id", id)
	}()
}

func (c *Conn) putMark(id string, value []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTry)
	defer cancel()
	_, err := c.cancels.Put(ctx, id, value)
	if err != nil {
		c.log.Debug("could not mark job cancelled yet", "job_id", id, "err", err)
	}
	return err
}

// CancelWatch knows which jobs their callers have cancelled: every key put
// in GENQ_CANCEL within its TTL (the job age limit). It answers from memory,
// so checking a job costs no round trip on its way to the model.
type CancelWatch struct {
	mu        sync.Mutex
	cancelled map[string]cancelMark
	ttl       time.Duration
}

// cancelMark is when a job was marked, and whether it was abandoned.
type cancelMark struct {
	at        time.Time
	abandoned bool
}

// IsCancelled reports whether the caller of the job queued at queued has
// cancelled or abandoned it. A cancel mark older than the job belongs to an
// earlier job of the same id (a batch rerun after an interrupted run
// republishes its ids), and one older than the bucket's TTL is gone from
// the bucket: neither counts. An abandon mark counts whenever the job was
// queued.
func (w *CancelWatch) IsCancelled(id string, queued time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.cancelled[id]
	return ok && time.Since(m.at) <= w.ttl && (m.abandoned || !m.at.Before(queued))
}

// forget drops a mark that was withdrawn.
func (w *CancelWatch) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.cancelled, id)
}

// Uncancel withdraws the cancel mark of id, so a producer that runs the same
// job again (a batch rerun) gets it run. A withdrawal NATS does not take
// (an election in a cluster) is tried again until cancelRetryFor passes or
// ctx ends.
func (c *Conn) Uncancel(ctx context.Context, id string) error {
	err := retryEach(ctx, cancelRetryFor, settleTry, func(ctx context.Context) error {
		if err := c.cancels.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("withdraw the cancel of %s: %w", id, err)
	}
	return nil
}

// add records a cancel and forgets those the bucket has expired, so memory
// stays bounded by the cancels of one TTL.
func (w *CancelWatch) add(id string, m cancelMark) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancelled[id] = m
	if len(w.cancelled)%1024 != 0 {
		return
	}
	for k, m := range w.cancelled {
		if time.Since(m.at) > w.ttl {
			delete(w.cancelled, k)
		}
	}
}

// WatchCancels follows GENQ_CANCEL until ctx ends. It returns once the
// cancels already in the bucket are known; from then on, a job cancelled at
// any time is either in IsCancelled or, if the cancel comes later, passed to
// fn as it arrives. A worker that registers a job for fn before checking
// IsCancelled therefore never misses a cancel.
func (c *Conn) WatchCancels(ctx context.Context, fn func(id string)) (*CancelWatch, error) {
	kw, err := c.cancels.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch cancels: %w", err)
	}
	cw := &CancelWatch{cancelled: map[string]cancelMark{}, ttl: c.Settings().MaxJobAge}
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
				cw.forget(e.Key())
				continue
			}
			cw.add(e.Key(), cancelMark{at: e.Created(), abandoned: bytes.Equal(e.Value(), markAbandoned)})
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
