package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// heartbeatKey is the worker's key in GENQ_WORKERS. Characters a key may not
// hold become "_", so any WORKER_ID can beat; dots stay (see WatchWorkers).
func heartbeatKey(v genq.Variant, workerID string) string {
	return string(v) + "." + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_=/.", r):
			return r
		}
		return '_'
	}, strings.Trim(workerID, "."))
}

// Beat publishes a worker's heartbeat.
func (c *Conn) Beat(ctx context.Context, hb genq.Heartbeat) error {
	data, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	key := heartbeatKey(hb.Variant, hb.WorkerID)
	_, err = c.workers.Put(ctx, key, data)
	if assetMissing(err) {
		// The bucket is in memory: a standalone server that restarted has
		// none, and every heartbeat would fail until someone re-creates it.
		c.log.Warn("the heartbeat bucket is gone (a NATS restart?); re-creating it", "bucket", WorkersBucket)
		if err = ensureWorkersBucket(ctx, c.js, c.Settings()); err == nil {
			_, err = c.workers.Put(ctx, key, data)
		}
	}
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// assetMissing reports whether err says a stream or bucket does not exist:
// a publish nobody stores answers "no responders".
func assetMissing(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
}

// RemoveBeat withdraws a worker's heartbeat as it exits.
func (c *Conn) RemoveBeat(ctx context.Context, v genq.Variant, workerID string) error {
	return c.workers.Delete(ctx, heartbeatKey(v, workerID))
}
