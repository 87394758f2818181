package tenant

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/genq/genq/internal/pause"
)

// ErrConflict is a Store's answer to an update whose revision is no longer
// the record's: another api updated it first.
var ErrConflict = errors.New("the counters changed since they were read")

// Store keeps the counters every api shares, one record per tenant and
// day, updated by compare-and-swap (natsqueue.TenantStore, over
// JetStream KV).
type Store interface {
	// Get reads a record and its revision; a record not there is zero,
	// revision 0, and a deleted one zero at the revision of the marker
	// its deletion left, if the store keeps one.
	Get(ctx context.Context, key string) (Counters, uint64, error)
	// Update writes c if the record is still at rev (0: not there yet),
	// returning its new revision, or ErrConflict.
	Update(ctx context.Context, key string, c Counters, rev uint64) (uint64, error)
	// Keys lists the records of day.
	Keys(ctx context.Context, day string) ([]string, error)
}

// CounterKey names tenant's record of day (2006-01-02).
func CounterKey(tenant, day string) string {
	return tenant + "." + day[0:4] + day[5:7] + day[8:10]
}

// Limiter admits and settles tenants' requests over a Store. It keeps
// the last record it read or wrote of each key, and its revision, so an
// admission costs one round trip to the store (the compare-and-swap)
// unless another api wrote the record since: then two more (a read, and
// the swap again). Updates of one key on this api go one at a time, so
// they never conflict with each other.
//
// A tenant without limits has nothing to admit against: its requests are
// admitted without a round trip, and what they took is gathered on this
// api and written at most every usageFlushEvery, so a busy open tenant
// (every request to an api without keys is the tenant "anonymous") costs
// the store one write a second rather than two a request.
type Limiter struct {
	store Store
	api   string
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*cached

	// gathered is open tenants' usage not yet written, by record key;
	// flushTimer writes it, set while there is some.
	gmu        sync.Mutex
	gathered   map[string]*gathered
	flushTimer *time.Timer
}

// usageFlushEvery is how long an open tenant's usage waits on its api
// before it is written: what GET /v1/usage may lag behind on other apis.
const usageFlushEvery = time.Second

// flushTimeout bounds a timed flush; usage that could not be written is
// kept for the next.
const flushTimeout = 10 * time.Second

// gathered is usage of one record not yet written.
type gathered struct {
	took  Cost
	usage []Usage
}

type cached struct {
	mu  sync.Mutex
	c   Counters
	rev uint64
	ok  bool // c and rev were read or written
}

// NewLimiter admits over store as api (a name of its own among the apis).
func NewLimiter(store Store, api string) *Limiter {
	return &Limiter{store: store, api: api, now: time.Now, keys: map[string]*cached{}}
}

// Ticket is an admitted request, to settle when it ends.
type Ticket struct {
	key      string
	reserved Cost
	minute   int64
	// open: its tenant had no limits, and nothing was reserved.
	open   bool
	Status Status
}

// maxSwaps bounds the compare-and-swap attempts of one update, beside
// its context's deadline: each failed one means another api's update
// went through, so the apis together always progress, and one update
// waits its turn rather than fail while many apis share a busy tenant.
const maxSwaps = 1000

// Admit counts a request of t asking for cost, in flight until its
// deadline, or refuses it with a *Refusal.
func (l *Limiter) Admit(ctx context.Context, t Tenant, cost Cost, deadline time.Time) (Ticket, error) {
	now := l.now()
	tk := Ticket{key: CounterKey(t.Name, dayOf(now)), reserved: cost, minute: unixMinute(now)}
	if !t.Limits.Bounded() {
		tk.open = true
		return tk, nil
	}
	err := l.update(ctx, tk.key, func(c *Counters) error {
		now = l.now()
		if r := c.admit(t, cost, now, l.api, deadline); r != nil {
			return r
		}
		tk.Status = c.status(t, now)
		return nil
	})
	return tk, err
}

// Settle ends an admitted request with what it took, and adds its usage:
// at once, or, for a tenant without limits, with this api's next flush.
func (l *Limiter) Settle(ctx context.Context, tk Ticket, took Cost, u Usage) error {
	if tk.open {
		l.gather(tk.key, took, u)
		return nil
	}
	return l.update(ctx, tk.key, func(c *Counters) error {
		c.settle(tk.reserved, took, tk.minute, l.now(), l.api, u)
		return nil
	})
}

// Record adds what a request took without admission (a batch's request,
// run by whichever api holds the batch) to tenant's counts of today.
func (l *Limiter) Record(ctx context.Context, tenant string, took Cost, u Usage) error {
	now := l.now()
	return l.update(ctx, CounterKey(tenant, dayOf(now)), func(c *Counters) error {
		c.record(took, l.now(), u)
		return nil
	})
}

// gather keeps what an open tenant's requests took for the next flush.
func (l *Limiter) gather(key string, took Cost, us ...Usage) {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	if l.gathered == nil {
		l.gathered = map[string]*gathered{}
	}
	g := l.gathered[key]
	if g == nil {
		g = &gathered{}
		l.gathered[key] = g
	}
	g.took.Tokens += took.Tokens
	g.took.Images += took.Images
	for _, u := range us {
		if u.Route != "" { // a request that only queued work has none
			g.usage = addUsage(g.usage, u)
		}
	}
	if l.flushTimer == nil {
		l.flushTimer = time.AfterFunc(usageFlushEvery, func() {
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			defer cancel()
			_ = l.Flush(ctx) // what failed is kept, and tried at the next
		})
	}
}

// Flush writes the usage gathered on this api of tenants without limits:
// GET /v1/usage calls it before reading, and the api before it exits.
// Usage whose write fails is kept for the next flush.
func (l *Limiter) Flush(ctx context.Context) error {
	l.gmu.Lock()
	pending := l.gathered
	l.gathered = nil
	if l.flushTimer != nil {
		l.flushTimer.Stop()
		l.flushTimer = nil
	}
	l.gmu.Unlock()
	var errs []error
	for key, g := range pending {
		err := l.update(ctx, key, func(c *Counters) error {
			c.record(g.took, l.now(), g.usage...)
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			l.gather(key, g.took, g.usage...)
		}
	}
	return errors.Join(errs...)
}

// Today reads tenant's record of today.
func (l *Limiter) Today(ctx context.Context, tenant string) (Counters, error) {
	return l.Day(ctx, tenant, l.now())
}

// Day reads tenant's record of t's UTC day.
func (l *Limiter) Day(ctx context.Context, tenant string, t time.Time) (Counters, error) {
	c, _, err := l.store.Get(ctx, CounterKey(tenant, dayOf(t)))
	return c, err
}

// Tenants lists the tenants with a record on t's UTC day.
func (l *Limiter) Tenants(ctx context.Context, t time.Time) ([]string, error) {
	keys, err := l.store.Keys(ctx, dayOf(t))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if i := len(k) - len(".20060102"); i > 0 {
			out = append(out, k[:i])
		}
	}
	return out, nil
}

// entry is key's cache entry.
func (l *Limiter) entry(key string) *cached {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		e = &cached{}
		l.keys[key] = e
		l.forgetOld(key)
	}
	return e
}

// forgetOld drops the entries of days before key's: a day's record is
// only written on that day, settlements aside.
func (l *Limiter) forgetOld(key string) {
	if len(l.keys) < 1024 {
		return
	}
	day := key[len(key)-8:]
	for k := range l.keys {
		if k[len(k)-8:] < day {
			delete(l.keys, k)
		}
	}
}

// update applies fn to key's record by compare-and-swap: from the cached
// record first, then, when the store says it changed, from a fresh read.
// A refusal from the cached record is checked against a fresh one, since
// another api's settlement may have made room.
func (l *Limiter) update(ctx context.Context, key string, fn func(*Counters) error) error {
	e := l.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	fresh := false
	for attempt := range maxSwaps {
		if !e.ok {
			c, rev, err := l.store.Get(ctx, key)
			if err != nil {
				return fmt.Errorf("read counters %s: %w", key, err)
			}
			e.c, e.rev, e.ok, fresh = c, rev, true, true
		}
		next := e.c.clone()
		if err := fn(&next); err != nil {
			var r *Refusal
			if errors.As(err, &r) && !fresh {
				e.ok = false
				continue
			}
			return err
		}
		rev, err := l.store.Update(ctx, key, next, e.rev)
		if errors.Is(err, ErrConflict) {
			e.ok = false
			if err := backOff(ctx, attempt); err != nil {
				return fmt.Errorf("update counters %s: %w", key, err)
			}
			continue
		}
		if err != nil {
			e.ok = false
			return fmt.Errorf("update counters %s: %w", key, err)
		}
		e.c, e.rev, fresh = next, rev, false
		return nil
	}
	return fmt.Errorf("update counters %s: %d attempts conflicted with other apis' updates", key, maxSwaps)
}

// backOff waits after the attempt-th conflict: not after the first (the
// read that follows is wait enough), then at random up to a bound that
// doubles from 0.2 ms to 20 ms, so apis that collide on a busy tenant's
// record stop colliding.
func backOff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	bound := min(100*time.Microsecond<<min(attempt, 10), 20*time.Millisecond)
	return pause.For(ctx, time.Duration(rand.Int64N(int64(bound)))+1)
}
