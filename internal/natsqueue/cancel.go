package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// cancelRetryFor is how long a cancel mark that NATS did not take is tried
// again in the background: long enough to ride out a NATS restart.
const cancelRetryFor = time.Minute

// Cancel marks a job cancelled. It does not take the caller's ctx, which
// has usually ended already. It waits at most two seconds; a mark that did
// not land by then (NATS is down) is tried again in the background, since
// a job queued without its caller would otherwise run for nobody.
func (c *Conn) Cancel(id string) {
	if c.putCancel(id) == nil {
		return
	}
	go func() {
		for end := time.Now().Add(cancelRetryFor); time.Now().Before(end) && !c.nc.IsClosed(); {
			time.Sleep(time.Second)
			if c.putCancel(id) == nil {
				return
			}
		}
		c.log.Warn("could not mark job cancelled", "job_id", id)
	}()
}

func (c *Conn) putCancel(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.cancels.Put(ctx, id, []byte("cancelled"))
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
	cancelled map[string]time.Time // job id → when it was cancelled
	ttl       time.Duration
}

// IsCancelled reports whether the caller of the job queued at queued has
// cancelled it. A mark older than the job belongs to an earlier job of the
// same id (a batch rerun after an interrupted run republishes its ids), and
// one older than the bucket's TTL is gone from the bucket: neither counts.
func (w *CancelWatch) IsCancelled(id string, queued time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.cancelled[id]
	return ok && time.Since(at) <= w.ttl && !at.Before(queued)
}

// forget drops a mark that was withdrawn.
func (w *CancelWatch) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.cancelled, id)
}

// Uncancel withdraws the cancel mark of id, so a producer that runs the same
// job again (a batch rerun) gets it run.
func (c *Conn) Uncancel(ctx context.Context, id string) error {
	if err := c.cancels.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("withdraw the cancel of %s: %w", id, err)
	}
	return nil
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
// any time is either in IsCancelled or, if the cancel comes later, passed to
// fn as it arrives. A worker that registers a job for fn before checking
// IsCancelled therefore never misses a cancel.
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
				cw.forget(e.Key())
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
