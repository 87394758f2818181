package natsqueue

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// LateLooks say when a Client looks in the results store for a job whose
// reply has not come. A reply is a core NATS message and can be lost on its
// way while the client's own connection stays up (its worker died after
// storing the result but before sending it again, or a best-effort error
// reply was dropped); the look after a reconnect never happens then, and
// without these the caller would wait out its deadline for a result that
// sits in the store.
type LateLooks struct {
	// After is the first look, counted from the job's queueing; 0 turns
	// the looks off (the store is then polled only after a reconnect).
	After time.Duration
	// MaxGap bounds the gap between two looks, which doubles from After:
	// a long generation (minutes) costs a look per MaxGap, not more.
	MaxGap time.Duration
	// PerSecond bounds the looks of all of the client's jobs together, so
	// thousands of long waits cost a bounded load on the store.
	PerSecond float64
	// PollsPerSecond bounds, the same way, the looks of the jobs that poll
	// the store: every job waiting when the client reconnects (its reply
	// may have come while it was away), a duplicate, and one whose stored
	// result could not be read. They have a pacer of their own, as a
	// reconnect is when results pile up in the store.
	PollsPerSecond float64
}

// DefaultLateLooks are the api's defaults (docs/protocol.md §3).
func DefaultLateLooks() LateLooks {
	return LateLooks{After: 5 * time.Second, MaxGap: 30 * time.Second, PerSecond: 20, PollsPerSecond: 200}
}

// pollGap is the first gap between a polling job's looks; it doubles up to
// MaxGap.
const pollGap = 500 * time.Millisecond

// polls is the schedule of a polling job's looks after its first.
func (l LateLooks) polls() LateLooks {
	return LateLooks{After: pollGap, MaxGap: l.MaxGap, PerSecond: l.PollsPerSecond}
}

// lookMargin is how long before the caller's deadline the last look goes:
// a result that sits in the store is then answered rather than a timeout.
const lookMargin = time.Second

// lookJitter spreads each gap by up to this fraction either way, so jobs
// queued together do not look together.
const lookJitter = 0.2

// lookPacer spaces the looks of all of a client's jobs at least gap apart.
type lookPacer struct {
	gap time.Duration

	mu   sync.Mutex
	next time.Time // the first free slot
}

func newLookPacer(perSecond float64) *lookPacer {
	if perSecond <= 0 {
		return nil
	}
	return &lookPacer{gap: time.Duration(float64(time.Second) / perSecond)}
}

// reserve takes the first free slot from now on and says when it is. A
// slot is only taken when a look is due, never ahead of time, so a job
// looking far ahead does not hold back the others.
func (p *lookPacer) reserve(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := now
	if p.next.After(at) {
		at = p.next
	}
	p.next = at.Add(p.gap)
	return at
}

// lateLook is one job's schedule of looks: a timer that fires when the
// next look is due, then again when its slot in the pacer comes.
type lateLook struct {
	looks    LateLooks
	pacer    *lookPacer
	deadline time.Time // the caller's; zero when none
	jitter   func() float64

	gap     time.Duration // before the next look
	last    bool          // the look before the deadline is scheduled
	slotted bool          // the timer waits for a slot, not for the look to be due
	timer   *time.Timer
}

// newLateLook schedules a job's first look; nil when looks are off.
func newLateLook(ctx context.Context, looks LateLooks, pacer *lookPacer) *lateLook {
	if looks.After <= 0 || pacer == nil {
		return nil
	}
	l := &lateLook{looks: looks, pacer: pacer, gap: looks.After, jitter: rand.Float64}
	l.deadline, _ = ctx.Deadline()
	if d, ok := l.nextDue(time.Now()); ok {
		l.timer = time.NewTimer(d)
	}
	return l
}

// newPollLook schedules a polling job's looks: the first at slot, taken
// in pacer for it by a reconnect's sweep, or when slot is zero as soon as
// pacer has one; then at looks' gaps. Nil when pacer is.
func newPollLook(ctx context.Context, looks LateLooks, pacer *lookPacer, slot time.Time) *lateLook {
	if pacer == nil {
		return nil
	}
	l := &lateLook{looks: looks, pacer: pacer, gap: looks.After, jitter: rand.Float64}
	l.deadline, _ = ctx.Deadline()
	var wait time.Duration
	if !slot.IsZero() {
		l.slotted, wait = true, max(0, time.Until(slot))
	}
	l.timer = time.NewTimer(wait)
	return l
}

// C fires when a look may go; nil (never) when none is scheduled.
func (l *lateLook) C() <-chan time.Time {
	if l == nil || l.timer == nil {
		return nil
	}
	return l.timer.C
}

// stop ends the schedule.
func (l *lateLook) stop() {
	if l != nil && l.timer != nil {
		l.timer.Stop()
	}
}

// fired is called when C fired: true when the look goes now; false when
// the look was due and its slot comes later (C fires again then).
func (l *lateLook) fired(now time.Time) bool {
	if l.slotted {
		l.slotted = false
		return true
	}
	at := l.pacer.reserve(now)
	if !at.After(now) {
		return true
	}
	l.slotted = true
	l.timer.Reset(at.Sub(now))
	return false
}

// again schedules the look after one that found nothing; none once the
// look before the deadline was made.
func (l *lateLook) again(now time.Time) {
	d, ok := l.nextDue(now)
	if !ok {
		l.timer = nil
		return
	}
	l.timer.Reset(d)
}

// nextDue is how long until the next look is due: the gap, jittered, then
// doubled up to MaxGap; never later than lookMargin before the deadline.
// False when the look before the deadline was the last.
func (l *lateLook) nextDue(now time.Time) (time.Duration, bool) {
	if l.last {
		return 0, false
	}
	d := time.Duration(float64(l.gap) * (1 - lookJitter + 2*lookJitter*l.jitter()))
	l.gap = min(2*l.gap, max(l.looks.MaxGap, l.looks.After))
	if l.deadline.IsZero() {
		return d, true
	}
	latest := l.deadline.Add(-lookMargin).Sub(now)
	if latest <= 0 {
		return 0, false
	}
	if d >= latest {
		l.last = true
		d = latest
	}
	return d, true
}
