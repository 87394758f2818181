package natsqueue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Router picks the worker a job should prefer: the one whose prefix cache
// most likely holds the job's conversation (docs/text.md, "Across
// workers"). It is the producer's half of routing by prefix; the worker's
// half is its own consumer and stealing (steal.go).
type Router struct {
	workers liveWorkers

	mu sync.Mutex
	// routed counts the jobs this producer published to each worker's
	// subject and still waits on.
	routed map[string]int
}

// liveWorkers lists the live workers of a variant: a WorkerSet.
type liveWorkers interface {
	Live() []genq.Heartbeat
}

// NewRouter routes over the workers workers lists.
func NewRouter(workers liveWorkers) *Router {
	return &Router{workers: workers, routed: map[string]int{}}
}

// loadFactor bounds a worker's share of this producer's routed jobs: at
// most this times an even share, rounded up (consistent hashing with
// bounded loads), so conversations that happen to hash to one worker do
// not leave the others idle.
const loadFactor = 1.25

// route returns the subject job is to be published to, "" for its class's
// shared subject, and a done to call once its answer came or the wait
// ended. The workers, the live ones that take routed jobs (two at least),
// are ranked by rendezvous hashing of the job's affinity key, so every
// turn of a conversation ranks them alike, and a worker that comes or goes
// moves only its own share of the keys. The job goes to the first in rank that
// has fewer of this producer's routed jobs than its slots and than its
// bounded share (loadFactor); to the shared subject when none has.
func (r *Router) route(job genq.Job) (subject string, done func()) {
	key := job.AffinityKey()
	if key == "" {
		return "", func() {}
	}
	type ranked struct {
		hb    genq.Heartbeat
		score uint64
	}
	var workers []ranked
	for _, hb := range r.workers.Live() {
		if hb.Routed && hb.Variant == job.Variant {
			workers = append(workers, ranked{hb, rendezvousScore(key, hb.WorkerID)})
		}
	}
	// With one worker there is no choice to make, and a routed job costs
	// an idle worker up to ownCheckEvery before its slots look at their
	// own consumer (a tiny model's answer through HTTP took 71 ms instead
	// of 19 at the median): the shared subject reaches the same worker
	// at once.
	if len(workers) < 2 {
		return "", func() {}
	}
	slices.SortFunc(workers, func(a, b ranked) int { return cmp.Compare(b.score, a.score) })
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 1 // this job
	for _, w := range workers {
		total += r.routed[w.hb.WorkerID]
	}
	share := int(math.Ceil(loadFactor * float64(total) / float64(len(workers))))
	for _, w := range workers {
		id := w.hb.WorkerID
		if n := r.routed[id]; n >= max(w.hb.Slots, 1) || n >= share {
			continue
		}
		r.routed[id]++
		var once sync.Once
		return RoutedSubject(job.Variant, id), func() {
			once.Do(func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.routed[id]--; r.routed[id] <= 0 {
					delete(r.routed, id)
				}
			})
		}
	}
	return "", func() {}
}

// rendezvousScore is worker's score for key: the highest score wins.
func rendezvousScore(key, worker string) uint64 {
	sum := sha256.Sum256([]byte(key + "\x00" + worker))
	return binary.BigEndian.Uint64(sum[:8])
}

// ensureRoutedConsumer creates, or with Adopt leaves as it is, the
// durable consumer of one worker's subject: the shared consumer's settings
// over the worker's subject alone, so a delivery from it is acked, retried
// and dead-lettered by the same rules.
func ensureRoutedConsumer(ctx context.Context, js jetstream.JetStream, s Settings, v genq.Variant, token string) (jetstream.Consumer, error) {
	name := routedConsumerPrefix(v) + token
	if s.Adopt {
		if c, err := js.Consumer(ctx, JobsStream, name); err == nil {
			return c, nil
		}
	}
	var cons jetstream.Consumer
	err := ensureAsset(ctx, "consumer "+name, func(ctx context.Context) error {
		c, err := js.CreateOrUpdateConsumer(ctx, JobsStream, jetstream.ConsumerConfig{
			Durable:       name,
			Description:   fmt.Sprintf("worker %s of variant %s: interactive jobs routed to it", token, v),
			FilterSubject: JobsSubject(v) + "." + token,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       s.AckWait,
			MaxDeliver:    maxDeliver(s.MaxAttempts),
			MaxAckPending: -1,
			MaxWaiting:    4096,
		})
		cons = c
		return err
	})
	return cons, err
}

// RouteBy makes the client publish each interactive job with an affinity
// key to the worker r picks, and the others as before.
func (cl *Client) RouteBy(r *Router) { cl.router = r }

// subjectOf is the subject of job: a worker's, or "" for the shared one.
func (cl *Client) subjectOf(job genq.Job) (string, func()) {
	if cl.router == nil || cl.class != Interactive {
		return "", func() {}
	}
	return cl.router.route(job)
}
