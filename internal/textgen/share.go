package textgen

import (
	"math"
	"time"

	"github.com/genq/genq/internal/genq"
)

// stepShare decides which tenants' sequences sit out a step, so that a
// tenant that has used less than its share of this model lately decodes
// in steps of its own rather than beside every other tenant's sequences
// (docs/protocol.md §11, "Within a step").
//
// The queue's fair share decides who takes a slot that frees; a job
// already running keeps its slot, and continuous batching puts every
// running sequence in every step. On a CPU a step's cost grows with its
// rows, so a light tenant's one sequence beside a heavy tenant's seven
// decodes several times slower than alone, however fair the queue was.
// Here each tenant's tokens on this model are counted, halving every
// halfLife, and divided by its weight: while tenants of more than one
// have work, one whose count is above slack times the least one's (plus
// floor) sits out the step. The least-served tenant always steps, so a
// step is never empty, and a tenant alone never sits out.
//
// A tenant that was idle comes back with its count decayed: it gets steps
// of its own until it has caught up with slack of the others, which after
// a long idle spell takes at most about one half-life of the others'
// pause. That is the credit a trickle of requests needs to be served at
// its speed alone; a tenant that keeps every slot busy is held to its
// weight, as the queue holds it.
type stepShare struct {
	halfLife time.Duration
	slack    float64
	floor    float64
	used     map[string]*tenantUse
}

// tenantUse is a tenant's decayed token count.
type tenantUse struct {
	tokens float64
	at     time.Time // when tokens was last decayed
}

// Defaults of stepShare: see newStepShare.
const (
	shareHalfLife = time.Second
	shareSlack    = 1.1
	shareFloor    = 64
)

// newStepShare counts over a half-life of a second: long enough to span
// many of a light tenant's requests (tens of milliseconds each on a
// CPU), short enough that a tenant's pause after another's return lasts
// well under a second. A slack of 1.5 lets tenants near their shares
// share steps (the queue already splits the slots by weight, and a step
// of every sequence reads the weights once); floor keeps a few prompt
// tokens of difference from splitting steps when counts are small.
func newStepShare() *stepShare {
	return &stepShare{halfLife: shareHalfLife, slack: shareSlack, floor: shareFloor, used: map[string]*tenantUse{}}
}

// count is tenant's decayed token count at now.
func (s *stepShare) count(tenant string, now time.Time) float64 {
	u := s.used[tenant]
	if u == nil {
		return 0
	}
	if dt := now.Sub(u.at); dt > 0 {
		u.tokens *= math.Exp2(-float64(dt) / float64(s.halfLife))
		u.at = now
	}
	return u.tokens
}

// use counts tokens of a step to tenant.
func (s *stepShare) use(tenant string, tokens int, now time.Time) {
	if tokens <= 0 {
		return
	}
	s.count(tenant, now)
	u := s.used[tenant]
	if u == nil {
		u = &tenantUse{at: now}
		s.used[tenant] = u
	}
	u.tokens += float64(tokens)
}

// sitOut is the tenants whose sequences leave this step out, given the
// weight of each tenant with work to step (a weight of 0 counts as 1);
// nil when none do.
func (s *stepShare) sitOut(working map[string]float64, now time.Time) map[string]bool {
	if s == nil || len(working) < 2 {
		return nil
	}
	least := math.Inf(1)
	per := make(map[string]float64, len(working))
	for t, w := range working {
		per[t] = s.count(t, now) / genq.Share{Weight: w}.WeightOrOne()
		least = min(least, per[t])
	}
	var out map[string]bool
	for t, n := range per {
		if n > least*s.slack+s.floor {
			if out == nil {
				out = map[string]bool{}
			}
			out[t] = true
		}
	}
	s.forget(now)
	return out
}

// forget drops the counts that have decayed below a token, so tenants
// seen once do not pile up; one dropped counts 0, as it nearly did.
func (s *stepShare) forget(now time.Time) {
	if len(s.used) <= 16 {
		return
	}
	for t := range s.used {
		if s.count(t, now) < 1 {
			delete(s.used, t)
		}
	}
}
