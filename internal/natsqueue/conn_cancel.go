package natsqueue

import (
	"context"
	"errors"
	"fmt"
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
