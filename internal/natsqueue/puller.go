package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// Puller pulls the jobs of one variant, interactive ones before batch ones.
// It is safe for concurrent use: every slot of a worker shares one.
type Puller struct {
	conn    *Conn
	variant genq.Variant
	// queues in the order they are served: interactive, then batch.
	queues [2]pullQueue
	// own and thief are set when the worker takes routed jobs
	// (NewRoutedPuller): own is served before queues, thief after the
	// interactive one.
	own   *ownQueue
	thief *stealer
	// fair are the tenants' consumers of each class, in the order of
	// queues, served by fair share with the shared consumer among them.
	fair [2]*tenantQueues
	// bells wake idle slots when a job of each class is queued
	// (BellSubject), in the order of queues.
	bells [2]*bell
	// room keeps the last free slot for a tenant that comes back
	// (KeepHeadroom); it counts the slots each tenant holds.
	room *headroom
}

// pullQueue is the durable consumer of one class.
type pullQueue struct {
	class    Class
	consumer jetstream.Consumer
	// maxDeliver is the consumer's delivery limit; 0 or less: none.
	maxDeliver int
	source     Source
	// routed: a worker's own consumer (see Delivery.routed).
	routed bool
}

// batchCheckEvery bounds how long an idle Next waits on the interactive
// consumer alone before it looks at the batch consumer again: the delay a
// batch job may see on an idle worker, and an idle slot's rate of pull
// requests (two per period).
const batchCheckEvery = 500 * time.Millisecond

// NewPuller binds the variant's durable consumers.
func (c *Conn) NewPuller(ctx context.Context, v genq.Variant) (*Puller, error) {
	p := &Puller{conn: c, variant: v, room: newHeadroom()}
	for i, class := range []Class{Interactive, Batch} {
		cons, err := c.js.Consumer(ctx, class.Stream(), class.Consumer(v))
		if err != nil {
			return nil, fmt.Errorf("bind consumer %s: %w", class.Consumer(v), err)
		}
		p.queues[i] = pullQueue{class: class, consumer: cons, source: FromShared}
		if info := cons.CachedInfo(); info != nil {
			p.queues[i].maxDeliver = info.Config.MaxDeliver
		}
		p.fair[i] = newTenantQueues(c, class, v, &p.queues[i], p.room)
	}
	p.bells = [2]*bell{newBell(), newBell()}
	// A ring is a job just queued, of the class and tenant it names: it
	// counts in the view of who waits, and idle slots should look now. Without the permission to
	// subscribe, slots still look every tenantCheckEvery.
	if _, err := c.nc.Subscribe(BellSubject(v), func(m *nats.Msg) {
		class, tenant, _ := strings.Cut(string(m.Data), " ")
		i := 0
		if class == Batch.String() {
			i = 1
		}
		p.fair[i].rang(tenant)
		p.room.saw(Class(i), tenant)
		// An idle slot that the headroom keeps would wake to take nothing:
		// a slot that frees takes the job, or the slot's next look.
		if !p.room.refuses(Class(i), tenant, p.fair[i].queued()) {
			p.bells[i].ring()
		}
	}); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", BellSubject(v), err)
	}
	return p, nil
}

// RouteOptions are a routed worker's settings.
type RouteOptions struct {
	// WorkerID names the worker's subject and consumer.
	WorkerID string
	// Workers lists the live workers; stealing reads their heartbeats.
	Workers liveWorkers
	// StealAfter is how long a job may wait unstarted on a live worker's
	// subject before an idle worker takes it.
	StealAfter time.Duration
}

// NewRoutedPuller is NewPuller for a worker that takes routed jobs: it
// pulls its own consumer before the shared ones, and with a free slot and
// nothing there takes jobs from other workers' consumers that their owner
// did not start in time, is gone, or is draining.
func (c *Conn) NewRoutedPuller(ctx context.Context, v genq.Variant, o RouteOptions) (*Puller, error) {
	p, err := c.NewPuller(ctx, v)
	if err != nil {
		return nil, err
	}
	p.own = &ownQueue{token: workerToken(o.WorkerID)}
	if _, err := p.ownQueue(ctx); err != nil {
		return nil, err
	}
	p.thief = &stealer{conn: c, variant: v, ownToken: p.own.token, workers: o.Workers, after: o.StealAfter,
		bound: map[string]*pullQueue{}, goneSince: map[string]time.Time{}}
	return p, nil
}

// Next asks for one job and waits up to wait for it. It returns nil, nil when
// none came. One call holds at most one pull request for one message at a
// time: a worker with k free slots keeps k calls outstanding, so it never
// holds a job it cannot run.
//
// The priority rule: each call first asks the interactive consumer, then
// the batch consumer, without waiting; a batch job is taken only when no
// interactive job was waiting. With nothing waiting, it waits on the
// interactive consumer only, batchCheckEvery at a time, and asks the batch
// consumer again in between. It never waits on the batch consumer, so an
// interactive job waits for at most one running job per slot to end,
// however many batch jobs are queued.
//
// The pull takes no context on purpose: abandoning it midway could drop a
// message already on its way, which would then wait out AckWait.
//
// A worker that takes routed jobs asks its own consumer before the
// interactive one, and, with nothing in either, looks for a job another
// worker did not start in time before it asks the batch consumer; it waits
// on the interactive consumer ownCheckEvery at a time, and asks the batch
// consumer no more often than without routing.
func (p *Puller) Next(wait time.Duration) (*Delivery, error) { return p.next(wait, true) }

// NextInteractive is Next for a slot kept for interactive jobs: it never
// takes a batch job, so a worker that runs batch work in its other slots
// always has one free for a caller who waits.
func (p *Puller) NextInteractive(wait time.Duration) (*Delivery, error) { return p.next(wait, false) }

// KeepHeadroom has the worker, of slots slots of which batchSlots may take
// batch jobs, keep the last free slot of each class for a tenant seen in
// it within window that holds none (headroom.go). Every delivery Next
// returns then holds a slot until Settled.
func (p *Puller) KeepHeadroom(slots, batchSlots int, window time.Duration) {
	p.room.keep(slots, batchSlots, window)
}

// Settled frees the slot a delivery held: the worker settled it, or
// handed it back.
func (p *Puller) Settled(d *Delivery) {
	if d != nil && d.room != nil {
		d.room.settled(d.Class, d.roomTenant)
		d.room = nil
	}
}

// Held is how many slots the puller counts as held by its deliveries:
// pulled, not yet Settled. A worker that has settled every job holds none;
// one that leaks a count keeps the headroom from a slot it does not use.
func (p *Puller) Held() int { return p.room.holding() }

func (p *Puller) next(wait time.Duration, batchToo bool) (*Delivery, error) {
	d, err := p.look(wait, batchToo)
	if d != nil && d.room == nil {
		p.hold(d)
	}
	return d, err
}

// hold counts the slot a job's delivery takes, until Settled; a wakeup
// takes none.
func (p *Puller) hold(d *Delivery) {
	if !d.Wakeup {
		p.room.took(d.Class, d.Tenant)
		d.room, d.roomTenant = p.room, d.Tenant
	}
}

func (p *Puller) look(wait time.Duration, batchToo bool) (*Delivery, error) {
	interactive := &p.queues[0]
	if d, err := p.interactiveNow(); d != nil || err != nil {
		return d, err
	}
	end := time.Now().Add(wait)
	var batchChecked time.Time
	for {
		// Taken before the looks, so that a ring during them is not lost;
		// a slot kept for interactive jobs does not wake for batch ones.
		rung := [2]<-chan struct{}{p.bells[0].rung(), nil}
		if batchToo {
			rung[1] = p.bells[1].rung()
		}
		tenants := p.fair[0].any() || p.fair[1].any()
		slice := p.slice(tenants)
		// At most every batchCheckEvery, however short the slice; at
		// every wake while tenants' consumers are there, whose jobs ring.
		if batchToo && (tenants || time.Since(batchChecked) >= batchCheckEvery-slice/2) {
			batchChecked = time.Now()
			if d, err := p.fair[1].next(p); d != nil || err != nil {
				return d, err
			}
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, nil
		}
		if tenants {
			// Jobs now arrive on several consumers, and a pull waits on
			// one: the slot waits for the bell instead, and looks at all.
			waitRing(min(left, slice), rung)
			if d, err := p.interactiveNow(); d != nil || err != nil {
				return d, err
			}
			continue
		}
		if d, err := p.fetch(interactive, min(left, slice)); d != nil || err != nil {
			p.fair[0].chargeShared(d)
			return d, err
		}
		if p.own != nil {
			// The shared consumer was just asked; only the worker's own
			// and the other workers' remain.
			if d, err := p.preferred(); d != nil || err != nil {
				return d, err
			}
			if d := p.stolen(); d != nil {
				return d, nil
			}
		}
	}
}

// slice is how long an idle slot waits on the shared interactive consumer
// at a time: the longest a job elsewhere may wait for it to look.
func (p *Puller) slice(tenants bool) time.Duration {
	switch {
	case tenants:
		return tenantCheckEvery
	case p.own != nil:
		return ownCheckEvery
	}
	return batchCheckEvery
}

// interactiveNow pulls an interactive job already waiting: the worker's own
// first, then the tenants' and the shared consumer's by fair share, then
// one due to be stolen.
func (p *Puller) interactiveNow() (*Delivery, error) {
	if d, err := p.preferred(); d != nil || err != nil {
		if d != nil && d.Tenant != "" {
			p.fair[0].charge(d, 0)
		}
		return d, err
	}
	if d, err := p.fair[0].next(p); d != nil || err != nil {
		return d, err
	}
	return p.stolen(), nil
}

// Waiting pulls up to n more interactive jobs already waiting on the
// shared consumer d came from, in one fetch, without waiting: for a
// backend that runs many jobs' work in one step (genq.BackendInfo.Gather).
// It takes none when d came from elsewhere, or while tenants' consumers
// are there, whose turns fair share decides one job at a time. It asks
// even when d's metadata counted none pending: the server's count can lag
// jobs published just before.
func (p *Puller) Waiting(d *Delivery, n int) ([]*Delivery, error) {
	q := &p.queues[0]
	if n <= 0 || d == nil || d.Source != FromShared || d.Class != Interactive || p.fair[0].any() {
		return nil, nil
	}
	batch, err := p.fetchBatch(q, n, 0)
	if err != nil {
		return nil, err
	}
	var out []*Delivery
	for m := range batch.Messages() {
		d := p.decode(q, m)
		p.fair[0].chargeShared(d)
		p.hold(d)
		out = append(out, d)
	}
	if err := batch.Error(); err != nil && len(out) == 0 && !foundNone(err) {
		return nil, fmt.Errorf("pull %s jobs: %w", q.class, err)
	}
	return out, nil
}

// fetch pulls at most one message from q, waiting up to wait for it; with
// wait 0, only a message already waiting.
func (p *Puller) fetch(q *pullQueue, wait time.Duration) (*Delivery, error) {
	batch, err := p.fetchBatch(q, 1, wait)
	if err != nil {
		return nil, err
	}
	var d *Delivery
	for m := range batch.Messages() {
		d = p.decode(q, m)
	}
	if d == nil {
		if err := batch.Error(); err != nil && !foundNone(err) {
			return nil, fmt.Errorf("pull %s jobs: %w", q.class, err)
		}
	}
	return d, nil
}

// fetchBatch asks q for at most n messages, waiting up to wait for them;
// with wait 0, only messages already waiting. Every pull goes through it,
// so that none misses the slow link's handling.
func (p *Puller) fetchBatch(q *pullQueue, n int, wait time.Duration) (jetstream.MessageBatch, error) {
	if wait == 0 && p.conn.slowLink() {
		// The client gives a no-wait fetch a second for its answer; over
		// a slower link the answer, jobs among it, would come unheard and
		// wait out their ack wait. A short wait covers the round trip.
		wait = 2 * time.Duration(p.conn.roundTrip.Load())
	}
	var batch jetstream.MessageBatch
	var err error
	if wait > 0 {
		batch, err = q.consumer.Fetch(n, jetstream.FetchMaxWait(wait))
	} else {
		batch, err = q.consumer.FetchNoWait(n)
	}
	if err != nil {
		return nil, fmt.Errorf("pull %s jobs: %w", q.class, err)
	}
	return batch, nil
}

// slowLinkRoundTrip is the round trip past which a no-wait fetch's answer
// may miss the second nats.go waits for it.
const slowLinkRoundTrip = 400 * time.Millisecond

// slowLink reports whether the last round trip measured is past
// slowLinkRoundTrip.
func (c *Conn) slowLink() bool { return time.Duration(c.roundTrip.Load()) > slowLinkRoundTrip }

// foundNone says whether a fetch's error only means that no job was
// waiting, or none came within its wait.
func foundNone(err error) bool {
	return errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

func (p *Puller) decode(q *pullQueue, m jetstream.Msg) *Delivery {
	d := &Delivery{msg: m, conn: p.conn, variant: p.variant, Class: q.class, Source: q.source, routed: q.routed, Data: m.Data(),
		Tenant: m.Headers().Get(HeaderTenant), receipt: m.Headers().Get(HeaderReceipt) != ""}
	d.Cost, _ = strconv.ParseInt(m.Headers().Get(HeaderCost), 10, 64)
	d.Weight, _ = strconv.ParseFloat(m.Headers().Get(HeaderWeight), 64)
	if meta, err := m.Metadata(); err == nil {
		d.Job.Attempt = int(meta.NumDelivered)
		d.Queued = meta.Timestamp
		d.Seq = meta.Sequence.Stream
		d.Last = q.maxDeliver > 0 && d.Job.Attempt >= q.maxDeliver
	}
	if m.Headers().Get(HeaderKind) == KindWakeup {
		d.Wakeup = true
		return d
	}
	attempt := d.Job.Attempt
	d.Job, d.Malformed = decodeJob(m.Data(), p.variant)
	d.Job.Attempt = attempt
	if d.Cost <= 0 {
		// A producer that says no cost (an old one, or one of no tenant)
		// is charged what the api would have said.
		d.Cost = JobCost(d.Job, len(m.Data()), defaultAnswerCost)
	}
	return d
}

// decodeJob reads a job message body meant for variant v. On error the job
// holds whatever could be read, so a reply can still reach its caller.
func decodeJob(data []byte, v genq.Variant) (genq.Job, error) {
	var j genq.Job
	if err := json.Unmarshal(data, &j); err != nil {
		return genq.Job{}, fmt.Errorf("decode job: %w", err)
	}
	return j, validateJob(j, v)
}

func validateJob(j genq.Job, v genq.Variant) error {
	if err := j.Validate(); err != nil {
		return err
	}
	if j.Variant != v {
		return fmt.Errorf("job %s is for variant %q on the subject of variant %s", j.ID, j.Variant, v)
	}
	return nil
}

// ownQueue is the worker's own consumer. It is bound again after a pull
// fails: a worker frozen past its heartbeat's life may find it removed by
// another worker's sweep.
type ownQueue struct {
	token string
	mu    sync.Mutex
	q     *pullQueue
}

func (p *Puller) ownQueue(ctx context.Context) (*pullQueue, error) {
	p.own.mu.Lock()
	defer p.own.mu.Unlock()
	if p.own.q != nil {
		return p.own.q, nil
	}
	cons, err := ensureRoutedConsumer(ctx, p.conn.js, p.conn.Settings(), p.variant, p.own.token)
	if err != nil {
		return nil, err
	}
	p.own.q = &pullQueue{class: Interactive, consumer: cons, source: FromOwn, routed: true}
	if info := cons.CachedInfo(); info != nil {
		p.own.q.maxDeliver = info.Config.MaxDeliver
	}
	return p.own.q, nil
}

// preferred pulls a job already waiting on the worker's own consumer.
func (p *Puller) preferred() (*Delivery, error) {
	if p.own == nil {
		return nil, nil
	}
	var d *Delivery
	var err error
	for range 2 { // a second time after binding it again
		ctx, cancel := context.WithTimeout(context.Background(), stealLook)
		var q *pullQueue
		q, err = p.ownQueue(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		if d, err = p.fetch(q, 0); err == nil {
			return d, nil
		}
		p.own.mu.Lock()
		p.own.q = nil
		p.own.mu.Unlock()
	}
	return nil, err
}

// stolen takes a job from another worker's consumer, if one is due.
func (p *Puller) stolen() *Delivery {
	if p.thief == nil {
		return nil
	}
	d := p.thief.take(p)
	if d != nil && d.Tenant != "" {
		p.fair[0].charge(d, 0)
	}
	return d
}
