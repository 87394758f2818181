package natsqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Bounds of the pull by fair share on the worker's side.
const (
	// tenantListEvery is how long a worker trusts its view of which
	// tenants have jobs waiting before it lists their consumers again
	// (one CONSUMER.LIST for all of its slots): how late a tenant that
	// starts waiting may be seen.
	tenantListEvery = 20 * time.Millisecond
	// tenantCheckEvery bounds how long an idle slot waits for the bell
	// before it looks at every consumer again: the delay a job may see on
	// an idle worker when no bell rang for it (a producer of no tenant on
	// the shared subject, a bell lost or not permitted).
	tenantCheckEvery = 100 * time.Millisecond
	// tenantProbeEvery bounds how often a slot tries a tenant's consumer
	// that lists no job waiting but some delivered and unacked: NATS does
	// not count a job due again (past its ack wait, or nak'ed) as pending,
	// so only a fetch finds it. One no-wait fetch per such tenant at most
	// this often is the cost while its jobs run elsewhere.
	tenantProbeEvery = tenantCheckEvery
	// tenantLook bounds one listing's round trips: a stream bind, the
	// list, and the binds of new tenants' consumers (made together), each
	// a round trip that a slow link may stretch to a second or more.
	tenantLook = 10 * time.Second
)

// tenantQueue is one tenant's durable consumer of one class.
type tenantQueue struct {
	pullQueue
	tenant string
	weight float64
	// pending is the jobs waiting as last listed, less those pulled since.
	pending uint64
	// ackPending is the jobs delivered and not yet acked as last listed:
	// any of them may be due again without being counted in pending.
	ackPending int
	// probed is when a fetch last found the consumer empty.
	probed time.Time
}

// tenantQueues are the tenants' consumers of one class and variant, and
// the fair share that orders them. The variant's shared consumer of the
// class is one of them, as the tenant "" of weight 1: jobs of no tenant
// (old producers, an api without keys) take their turn like a tenant's.
type tenantQueues struct {
	conn    *Conn
	class   Class
	variant genq.Variant
	share   *fairShare
	shared  *pullQueue
	room    *headroom
	// sharedName is the shared consumer's name, and sharedQ its jobs as
	// the tenant "" (mu held): listed, rung and pulled as a tenant's.
	sharedName string
	sharedQ    *tenantQueue

	// listMu lets one slot list the consumers at a time, outside mu, so
	// the others go on pulling meanwhile.
	listMu sync.Mutex
	stream jetstream.Stream // listMu held

	mu     sync.Mutex
	listed time.Time
	queues map[string]*tenantQueue // by consumer name
}

func newTenantQueues(c *Conn, class Class, v genq.Variant, shared *pullQueue, room *headroom) *tenantQueues {
	return &tenantQueues{conn: c, class: class, variant: v, share: newFairShare(), shared: shared, room: room, queues: map[string]*tenantQueue{},
		sharedName: class.Consumer(v), sharedQ: &tenantQueue{weight: 1}}
}

// any reports whether a tenant's consumer exists: only then does an idle
// slot need to look beyond the shared consumer.
func (t *tenantQueues) any() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queues) > 0
}

// next pulls one job waiting on the class's consumers, the tenants' in
// their fair-share order with the shared consumer among them, or returns
// nil when none has one.
//
// A tenant the headroom does not allow another slot is passed over, its
// jobs left waiting for the next slot that frees.
func (t *tenantQueues) next(p *Puller) (*Delivery, error) {
	t.refresh()
	cs := t.waiting()
	waiting := t.queued()
	tried := map[string]bool{}
	for {
		c, guess, ok := t.share.pick(cs, tried)
		if !ok {
			return nil, nil
		}
		tried[c.tenant] = true
		if !t.room.claim(t.class, c.tenant, waiting) {
			t.share.release(c.tenant, c.weight(), guess)
			continue
		}
		d, err := t.pull(p, c, guess)
		if d == nil || d.Wakeup {
			t.room.unclaim(t.class, c.tenant)
		} else {
			t.room.saw(t.class, c.tenant)
			d.room, d.roomTenant = t.room, c.tenant
		}
		if d != nil || err != nil {
			return d, err
		}
	}
}

// pull fetches one job waiting on c's consumer, and charges it in place
// of the guess its pick reserved.
func (t *tenantQueues) pull(p *Puller, c candidate, guess int64) (*Delivery, error) {
	q := &c.queue.pullQueue
	if c.queue.tenant == "" {
		q = t.shared
	}
	d, err := p.fetch(q, 0)
	weight := c.weight()
	if err != nil || d == nil || d.Wakeup || d.Tenant != c.tenant {
		t.share.release(c.tenant, weight, guess)
		switch {
		case err == nil && d == nil:
			t.drained(c.queue)
		case d != nil:
			t.pulled(c.queue)
			t.charge(d, c.queue.weight) // not the pick's: charged as it comes
		}
		return d, err
	}
	t.pulled(c.queue)
	d.charged = func(real int64) { t.share.settle(d.Tenant, weight, d.Cost, real) }
	t.share.chargeReserved(d.Tenant, weight, guess, d.Cost)
	return d, nil
}

// charge counts a delivery to its tenant: one of its own consumer's, or a
// tenant's job routed to this worker or stolen (its weight from the
// tenant's consumer, when this worker has listed it, else from the job's
// Genq-Weight: a tenant whose jobs all came routed has no consumer here).
func (t *tenantQueues) charge(d *Delivery, weight float64) {
	if d.Wakeup {
		return
	}
	if weight == 0 {
		weight = t.weightOf(d.Tenant, d.Weight)
	}
	d.charged = func(real int64) { t.share.settle(d.Tenant, weight, d.Cost, real) }
	t.share.charge(d.Tenant, weight, d.Cost)
}

func (t *tenantQueues) weightOf(tenant string, said float64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.queues[TenantConsumerName(t.class, t.variant, tenant)]; ok {
		return q.weight
	}
	return weightOr1(said)
}

// waiting is the candidates with jobs waiting, or maybe waiting. The
// shared consumer is one when the listing or the bell counted a job on
// it, and at most every tenantProbeEvery besides (sharedMayWait): trying
// it before every pick was a fetch that found nothing, a round trip more
// on every tenant's job, and its virtual time, never charged, kept it
// first.
func (t *tenantQueues) waiting() []candidate {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var out []candidate
	if t.sharedQ.sharedMayWait(now) {
		out = append(out, candidate{tenant: "", queue: t.sharedQ})
	}
	for _, q := range t.queues {
		if q.mayWait(now) {
			out = append(out, candidate{tenant: q.tenant, queue: q})
		}
	}
	return out
}

// mayWait reports whether a fetch may find a job on q: one listed as
// pending, or one delivered and unacked that may be due again (its
// worker died, or it was nak'ed), tried at most every tenantProbeEvery.
func (q *tenantQueue) mayWait(now time.Time) bool {
	return q.pending > 0 || q.ackPending > 0 && now.Sub(q.probed) >= tenantProbeEvery
}

// sharedMayWait reports whether a fetch may find a job on the shared
// consumer: one listed or rung, or a look due. Old producers' jobs ring
// no bell, and a job due again is not pending; the listing (every
// tenantListEvery while slots pull) or the look finds them.
func (q *tenantQueue) sharedMayWait(now time.Time) bool {
	return q.pending > 0 || now.Sub(q.probed) >= tenantProbeEvery
}

// queued is the tenants whose consumers hold jobs waiting, as last
// listed or rung, less those pulled since: the headroom keeps no slot for
// them, as fair share orders them. A consumer waiting() tries only for a
// job due again does not count: its listing may predate the ack of the
// job that a worker ran, and counting it let another tenant take the slot
// kept for one coming back.
func (t *tenantQueues) queued() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for _, q := range t.queues {
		if q.pending > 0 {
			out[q.tenant] = true
		}
	}
	return out
}

func (t *tenantQueues) drained(q *tenantQueue) {
	t.mu.Lock()
	q.pending = 0
	q.probed = time.Now()
	t.mu.Unlock()
}

func (t *tenantQueues) pulled(q *tenantQueue) {
	t.mu.Lock()
	if q.pending > 0 {
		q.pending--
	}
	t.mu.Unlock()
}

// refresh lists the class's consumers again when the view is older than
// tenantListEvery. One slot lists, outside mu, while the others go on
// with the view they have.
func (t *tenantQueues) refresh() {
	if !t.listMu.TryLock() {
		return
	}
	defer t.listMu.Unlock()
	t.mu.Lock()
	due := time.Since(t.listed) >= tenantListEvery
	if due {
		t.listed = time.Now()
	}
	t.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tenantLook)
	defer cancel()
	if err := t.list(ctx); err != nil {
		// A listing cut short by a slow link keeps the stream's binding
		// and the consumers bound; only a stream gone needs a new one.
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			t.stream = nil
		}
		t.conn.log.Debug("could not list the tenants' consumers", "class", t.class, "err", err)
	}
}

// list reads every tenant consumer's waiting jobs and weight; listMu held.
func (t *tenantQueues) list(ctx context.Context) error {
	if t.stream == nil {
		stream, err := t.conn.js.Stream(ctx, t.class.Stream())
		if err != nil {
			return fmt.Errorf("bind stream %s: %w", t.class.Stream(), err)
		}
		t.stream = stream
	}
	prefix := tenantConsumerPrefix(t.class, t.variant)
	var infos []*jetstream.ConsumerInfo
	start := time.Now()
	var shared *jetstream.ConsumerInfo
	lister := t.stream.ListConsumers(ctx)
	for info := range lister.Info() {
		switch {
		case strings.HasPrefix(info.Name, prefix):
			infos = append(infos, info)
		case info.Name == t.sharedName:
			shared = info
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", t.class.Stream(), err)
	}
	t.conn.roundTrip.Store(int64(time.Since(start)))
	// A consumer that could not be bound (deleted meanwhile, or the
	// listing's deadline) is left out until a later listing binds it; the
	// others' counts are still taken.
	bindErr := t.bindNew(ctx, infos)
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[string]bool{}
	if shared != nil {
		t.sharedQ.pending = shared.NumPending
	}
	for _, info := range infos {
		q, ok := t.queues[info.Name]
		if !ok {
			continue
		}
		seen[info.Name] = true
		q.pending = info.NumPending
		q.ackPending = info.NumAckPending
		q.weight = weightOf(info.Config.Metadata)
		if q.pending > 0 {
			t.room.saw(t.class, q.tenant)
		}
	}
	for name := range t.queues {
		if !seen[name] {
			delete(t.queues, name)
		}
	}
	return bindErr
}

// bindNew binds the listed consumers not bound yet, all at once (one
// round trip for all, not one each, over a slow link), and keeps each
// one bound even when another's bind fails.
func (t *tenantQueues) bindNew(ctx context.Context, infos []*jetstream.ConsumerInfo) error {
	t.mu.Lock()
	var unknown []*jetstream.ConsumerInfo
	for _, info := range infos {
		if _, ok := t.queues[info.Name]; !ok {
			unknown = append(unknown, info)
		}
	}
	t.mu.Unlock()
	errs := make([]error, len(unknown))
	var wg sync.WaitGroup
	for i, info := range unknown {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := t.bind(ctx, info)
			if err != nil {
				errs[i] = err
				return
			}
			t.mu.Lock()
			t.queues[info.Name] = q
			t.mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bind binds a listed tenant consumer seen for the first time.
func (t *tenantQueues) bind(ctx context.Context, info *jetstream.ConsumerInfo) (*tenantQueue, error) {
	cons, err := t.conn.js.Consumer(ctx, t.class.Stream(), info.Name)
	if err != nil {
		return nil, fmt.Errorf("bind consumer %s: %w", info.Name, err)
	}
	return &tenantQueue{
		pullQueue: pullQueue{class: t.class, consumer: cons, source: FromTenant, maxDeliver: info.Config.MaxDeliver},
		tenant:    cmp.Or(info.Config.Metadata[metaTenant], strings.TrimPrefix(info.Name, tenantConsumerPrefix(t.class, t.variant))),
	}, nil
}

// weightOf reads a tenant consumer's weight; anything unreadable is 1.
func weightOf(meta map[string]string) float64 {
	w, err := strconv.ParseFloat(meta[metaWeight], 64)
	if err != nil || !(w > 0) {
		return 1
	}
	return w
}

// chargeShared charges a job the shared consumer gave an idle slot's wait
// to the tenant "" of weight 1, as its turn by fair share would have.
func (t *tenantQueues) chargeShared(d *Delivery) {
	if d != nil && !d.Wakeup {
		t.charge(d, 1)
	}
}

// rang counts a job the bell says was just queued for tenant ("" for the
// shared consumer's), so that the next look pulls it without listing the
// consumers again; a tenant not seen yet has them listed at the next look.
func (t *tenantQueues) rang(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tenant == "" {
		t.sharedQ.pending++
		return
	}
	if q, ok := t.queues[TenantConsumerName(t.class, t.variant, tenant)]; ok {
		q.pending++
		return
	}
	t.listed = time.Time{}
}

// bell wakes every idle slot of a worker at once: a channel closed at
// each ring, and replaced.
type bell struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBell() *bell { return &bell{ch: make(chan struct{})} }

// rung is closed at the next ring.
func (b *bell) rung() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *bell) ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// waitRing waits for either bell taken (a nil one never rings), or for d.
func waitRing(d time.Duration, rung [2]<-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-rung[0]:
	case <-rung[1]:
	case <-t.C:
	}
}
