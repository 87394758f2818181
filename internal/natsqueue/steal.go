package natsqueue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Bounds of routing on the worker's side.
const (
	// ownCheckEvery bounds how long an idle slot waits on the shared
	// consumer before it looks at its own again: the delay a routed job may
	// see on an idle worker.
	ownCheckEvery = 100 * time.Millisecond
	// stealEvery is how often, at most, an idle worker looks at the other
	// workers' consumers (one look for all of its slots).
	stealEvery = 250 * time.Millisecond
	// stealLook bounds one look's round trips.
	stealLook = 2 * time.Second
)

// stealer looks, for one worker, at the other workers' consumers of its
// variant. A job on one of them is taken when its owner is gone (no live
// heartbeat, or draining: anything the consumer would deliver), when its
// oldest unstarted job has waited past after, or when the consumer has a
// redelivery due (its owner went silent past the ack wait). A taken job is
// an ordinary delivery of that consumer: the ack, the redelivery count and
// the dead letter are the same as from the owner. Each look also sweeps:
// a consumer whose owner this worker has seen gone for a heartbeat's life
// is removed once it is empty, and a worker's subject holding jobs with no
// consumer gets its consumer again. The wait keeps the removal safe: the
// producers stop routing to a worker when its heartbeat expires, so a
// heartbeat's life later no job can reach the consumer any more, and one
// found empty stays empty; removed sooner, a job routed in the meantime
// could be taken from it and delivered again by the consumer given back.
type stealer struct {
	conn     *Conn
	variant  genq.Variant
	ownToken string
	workers  liveWorkers
	after    time.Duration

	mu    sync.Mutex
	next  time.Time
	bound map[string]*pullQueue // consumers bound so far, by name
	// goneSince is when this worker first saw each consumer's owner gone.
	goneSince map[string]time.Time
	// stream is the jobs stream, bound on the first look and again after a
	// look that failed, rather than asked for at every look.
	stream jetstream.Stream
}

// take makes at most one look every stealEvery, across all of the worker's
// slots, and pulls the first job due.
func (s *stealer) take(p *Puller) *Delivery {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	now := time.Now()
	if now.Before(s.next) {
		return nil
	}
	s.next = now.Add(stealEvery)
	ctx, cancel := context.WithTimeout(context.Background(), stealLook)
	defer cancel()
	d, err := s.look(ctx, p)
	if err != nil {
		s.conn.log.Debug("could not look at the other workers' jobs", "err", err)
	}
	return d
}

func (s *stealer) look(ctx context.Context, p *Puller) (*Delivery, error) {
	if s.stream == nil {
		stream, err := s.conn.js.Stream(ctx, JobsStream)
		if err != nil {
			return nil, fmt.Errorf("bind stream %s: %w", JobsStream, err)
		}
		s.stream = stream
	}
	stream := s.stream
	live := map[string]bool{}
	for _, hb := range s.workers.Live() {
		if hb.Routed && hb.Variant == s.variant {
			live[workerToken(hb.WorkerID)] = true
		}
	}
	prefix := routedConsumerPrefix(s.variant)
	has := map[string]bool{}
	var due []string
	lister := stream.ListConsumers(ctx)
	for info := range lister.Info() {
		token, ok := strings.CutPrefix(info.Name, prefix)
		if !ok {
			continue
		}
		has[token] = true
		if token == s.ownToken {
			continue
		}
		if live[token] {
			delete(s.goneSince, token)
		} else if _, ok := s.goneSince[token]; !ok {
			s.goneSince[token] = time.Now()
		}
		switch {
		case info.NumPending == 0 && info.NumAckPending == 0:
			if !live[token] && time.Since(s.goneSince[token]) >= s.conn.Settings().HeartbeatTTL {
				s.sweep(ctx, stream, info.Name)
				delete(s.goneSince, token)
			}
		case !live[token], info.NumPending == 0:
			due = append(due, info.Name)
		case s.oldestWait(ctx, stream, info) > s.after:
			due = append(due, info.Name)
		}
	}
	if err := lister.Err(); err != nil {
		s.stream = nil
		return nil, fmt.Errorf("list consumers: %w", err)
	}
	for token := range s.goneSince {
		if !has[token] { // removed by another worker's sweep
			delete(s.goneSince, token)
		}
	}
	s.adoptOrphans(ctx, stream, has)
	for _, name := range due {
		q, err := s.bind(ctx, name)
		if err != nil {
			continue
		}
		d, err := p.fetch(q, 0)
		if err != nil {
			delete(s.bound, name)
			continue
		}
		if d != nil {
			return d, nil
		}
	}
	return nil, nil
}

// oldestWait is how long the consumer's oldest undelivered job has waited,
// by the stream's clock; 0 when it cannot tell.
func (s *stealer) oldestWait(ctx context.Context, stream jetstream.Stream, info *jetstream.ConsumerInfo) time.Duration {
	m, err := stream.GetMsg(ctx, info.Delivered.Stream+1, jetstream.WithGetMsgSubject(info.Config.FilterSubject))
	if err != nil {
		return 0
	}
	return time.Since(m.Time)
}

// sweep removes an empty consumer whose owner is gone.
func (s *stealer) sweep(ctx context.Context, stream jetstream.Stream, name string) {
	delete(s.bound, name)
	if err := stream.DeleteConsumer(ctx, name); err != nil {
		s.conn.log.Debug("could not remove a gone worker's consumer", "consumer", name, "err", err)
		return
	}
	s.conn.log.Info("removed a gone worker's empty consumer", "consumer", name)
}

// adoptOrphans gives a consumer back to every worker subject that holds
// jobs and has none, so they can be stolen.
func (s *stealer) adoptOrphans(ctx context.Context, stream jetstream.Stream, has map[string]bool) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(JobsSubject(s.variant)+".*"))
	if err != nil {
		return
	}
	for subject, n := range info.State.Subjects {
		token := strings.TrimPrefix(subject, JobsSubject(s.variant)+".")
		if n == 0 || has[token] {
			continue
		}
		if _, err := ensureRoutedConsumer(ctx, s.conn.js, s.conn.Settings(), s.variant, token); err != nil {
			s.conn.log.Warn("could not restore the consumer of a worker's subject", "subject", subject, "err", err)
			continue
		}
		s.conn.log.Warn("restored the consumer of a worker's subject that held jobs without one", "subject", subject, "jobs", n)
	}
}

func (s *stealer) bind(ctx context.Context, name string) (*pullQueue, error) {
	if q, ok := s.bound[name]; ok {
		return q, nil
	}
	cons, err := s.conn.js.Consumer(ctx, JobsStream, name)
	if err != nil {
		return nil, err
	}
	q := &pullQueue{class: Interactive, consumer: cons, source: FromStolen, routed: true}
	if info := cons.CachedInfo(); info != nil {
		q.maxDeliver = info.Config.MaxDeliver
	}
	s.bound[name] = q
	return q, nil
}
