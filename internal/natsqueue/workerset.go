package natsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// WorkerSet is the live workers of one variant, as their heartbeats say.
// A worker counts as live until HeartbeatTTL after the last heartbeat this
// process saw from it (its own clock, so skew between hosts does not matter).
type WorkerSet struct {
	ttl func() time.Duration
	now func() time.Time

	mu    sync.Mutex
	seen  map[string]seenBeat
	ready bool
}

type seenBeat struct {
	hb genq.Heartbeat
	at time.Time
}

// WatchWorkers follows the heartbeats of variant v until ctx ends.
func (c *Conn) WatchWorkers(ctx context.Context, v genq.Variant) (*WorkerSet, error) {
	// ">" and not "*": a worker id may hold dots (a host name such as
	// ip-10-0-0-5.ec2.internal is the default), and "*" matches one token.
	return c.watchWorkers(ctx, string(v)+".>")
}

// WatchAllWorkers follows the heartbeats of every queue (every variant
// and catalogue model) until ctx ends.
func (c *Conn) WatchAllWorkers(ctx context.Context) (*WorkerSet, error) {
	return c.watchWorkers(ctx, ">")
}

// watchWorkers follows the heartbeats whose keys match keys until ctx ends.
func (c *Conn) watchWorkers(ctx context.Context, keys string) (*WorkerSet, error) {
	w, err := c.workers.Watch(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("watch heartbeats: %w", err)
	}
	ws := &WorkerSet{ttl: func() time.Duration { return c.Settings().HeartbeatTTL }, now: time.Now, seen: map[string]seenBeat{}}
	go ws.follow(ctx, c, keys, w)
	return ws, nil
}

// Of is the live workers of queue v among the set's.
func (ws *WorkerSet) Of(v genq.Variant) *QueueWorkers { return &QueueWorkers{set: ws, queue: v} }

// QueueWorkers is the live workers of one queue in a WorkerSet of several.
type QueueWorkers struct {
	set   *WorkerSet
	queue genq.Variant
}

// Live returns the heartbeats of the queue's live workers, not draining.
func (q *QueueWorkers) Live() []genq.Heartbeat {
	var live []genq.Heartbeat
	for _, hb := range q.set.Live() {
		if hb.Variant == q.queue {
			live = append(live, hb)
		}
	}
	return live
}

// follow applies heartbeats until ctx ends. A standalone server that
// restarts loses the in-memory bucket and the watch's consumer with it, and
// the watch would stay silent long after workers re-created the bucket: so
// after each reconnect the bucket is ensured and the watch started afresh.
func (ws *WorkerSet) follow(ctx context.Context, c *Conn, pattern string, w jetstream.KeyWatcher) {
	reconnects := c.nc.Stats().Reconnects
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				w = nil // rewatched at the next tick
				continue
			}
			ws.apply(e)
		case <-tick.C:
			n := c.nc.Stats().Reconnects
			if (n == reconnects && w != nil) || !c.nc.IsConnected() {
				continue
			}
			if w != nil {
				_ = w.Stop()
				w = nil
			}
			if err := ensureWorkersBucket(ctx, c.js, c.Settings()); err != nil {
				c.log.Debug("could not ensure the heartbeat bucket; retrying", "err", err)
				continue
			}
			nw, err := c.workers.Watch(ctx, pattern)
			if err != nil {
				c.log.Debug("could not watch heartbeats; retrying", "err", err)
				continue
			}
			reconnects, w = n, nw
			ws.mu.Lock()
			ws.ready = false // the new watch replays the bucket first
			ws.mu.Unlock()
		}
	}
}

func (ws *WorkerSet) apply(e jetstream.KeyValueEntry) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e == nil { // the watcher has replayed what the bucket held
		ws.ready = true
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(ws.seen, e.Key())
		return
	}
	var hb genq.Heartbeat
	if err := json.Unmarshal(e.Value(), &hb); err != nil {
		return
	}
	at := ws.now()
	// A replayed entry is as old as the bucket says, not as old as now.
	if !ws.ready && e.Created().Before(at) {
		at = e.Created()
	}
	ws.seen[e.Key()] = seenBeat{hb: hb, at: at}
}

// Live returns the heartbeats of the workers that are live now, not draining.
func (ws *WorkerSet) Live() []genq.Heartbeat {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	cutoff := ws.now().Add(-ws.ttl())
	var live []genq.Heartbeat
	for k, s := range ws.seen {
		if s.at.Before(cutoff) {
			delete(ws.seen, k)
			continue
		}
		if !s.hb.Draining {
			live = append(live, s.hb)
		}
	}
	return live
}
