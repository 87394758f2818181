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

// forget drops a mark that was withdrawn.
func (w *CancelWatch) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.cancelled, id)
}
