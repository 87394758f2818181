package natsqueue

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"

	"github.com/genq/genq/internal/genq"
)

// fairShare decides which tenant a free slot serves next, among those with
// jobs waiting: the one served the fewest tokens per unit of weight.
// It is start-time fair queuing over tokens, the virtual-time form of
// weighted deficit round robin: a job's cost is charged once it is pulled,
// so nothing has to be read before the pull, and a costly job puts its
// tenant back by cost / weight. A tenant that comes back after waiting for
// nothing starts level with those that kept waiting, so an idle spell
// banks no credit. It is safe for concurrent use; each class has its own.
type fairShare struct {
	mu sync.Mutex
	// served is each tenant's virtual time: tokens charged / weight.
	served map[string]float64
	// clock is the virtual time of the latest pick: where a tenant that
	// starts waiting again begins.
	clock float64
	// waiting is the tenants that had jobs waiting at the latest order.
	waiting map[string]bool
	// lastCost is each tenant's latest job's estimated cost: what a pick
	// reserves before its pull says the job's own.
	lastCost map[string]int64
}

func newFairShare() *fairShare {
	return &fairShare{served: map[string]float64{}, waiting: map[string]bool{}, lastCost: map[string]int64{}}
}

// candidate is a queue with jobs waiting, as order sees it.
type candidate struct {
	tenant string
	queue  *tenantQueue
}

// weight is the candidate's tenant's weight: its consumer's, 1 for none.
func (c candidate) weight() float64 {
	if c.queue == nil {
		return 1
	}
	return weightOr1(c.queue.weight)
}

// pick is the first candidate in order that is not in tried, with its
// turn reserved at once: a guess of its job's cost (its tenant's latest
// job's) is charged before the pull. Slots that free together (the
// sequences of one step end together) then each see the others' picks;
// without it every one of them took the tenant first in order when they
// looked, eight jobs of one tenant at once, and at 3:1 weights the share
// missed by 10%. The pull then charges the job's own estimate in place of
// the guess (chargeReserved), or gives the guess back (release).
func (f *fairShare) pick(cs []candidate, tried map[string]bool) (c candidate, guess int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.orderLocked(cs) {
		if tried[c.tenant] {
			continue
		}
		guess = f.lastCost[c.tenant]
		if guess <= 0 {
			guess = defaultAnswerCost
		}
		f.served[c.tenant] += float64(guess) / c.weight()
		return c, guess, true
	}
	return candidate{}, 0, false
}

// chargeReserved charges a pulled job's estimated cost in place of the
// guess its pick reserved.
func (f *fairShare) chargeReserved(tenant string, weight float64, guess, cost int64) {
	weight = weightOr1(weight)
	f.mu.Lock()
	defer f.mu.Unlock()
	// The clock moves with picks that took a job, from where the pick
	// started, as charge moves it: a pick given back (nothing pulled, or
	// the headroom said no) must not move a returning tenant's start.
	f.clock = max(f.clock, f.served[tenant]-float64(guess)/weight)
	f.served[tenant] += float64(max(cost, 1)-guess) / weight
	f.lastCost[tenant] = max(cost, 1)
}

// release gives back a pick's guess when its pull took no job.
func (f *fairShare) release(tenant string, weight float64, guess int64) {
	weight = weightOr1(weight)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served[tenant] -= float64(guess) / weight
}

// order sorts the candidates (tenants with jobs waiting) in the order a
// free slot should try them: least virtual time first, ties by name so
// every worker breaks them alike.
func (f *fairShare) order(cs []candidate) []candidate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orderLocked(cs)
}

// orderLocked is order with f.mu held.
func (f *fairShare) orderLocked(cs []candidate) []candidate {
	now := make(map[string]bool, len(cs))
	for _, c := range cs {
		now[c.tenant] = true
		if !f.waiting[c.tenant] && f.served[c.tenant] < f.clock {
			f.served[c.tenant] = f.clock
		}
	}
	f.waiting = now
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(f.served[a.tenant], f.served[b.tenant]), cmp.Compare(a.tenant, b.tenant))
	})
	return out
}

// charge counts cost tokens served to tenant, of the given weight.
func (f *fairShare) charge(tenant string, weight float64, cost int64) {
	weight = weightOr1(weight)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.waiting[tenant] && f.served[tenant] < f.clock {
		// A routed job of a tenant not waiting here: counted from now.
		f.served[tenant] = f.clock
	}
	// The pick's start is the clock: a tenant starting to wait now
	// competes from there, not from what it was owed long ago.
	f.clock = max(f.clock, f.served[tenant])
	f.served[tenant] += float64(max(cost, 1)) / weight
	f.lastCost[tenant] = max(cost, 1)
	f.waiting[tenant] = true
}

// settle corrects a charge once a job's real cost is known.
func (f *fairShare) settle(tenant string, weight float64, charged, real int64) {
	weight = weightOr1(weight)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served[tenant] += float64(real-charged) / weight
}

// defaultAnswerCost is the answer's bound charged for a job whose producer
// gave no cost and which sets no bound itself.
const defaultAnswerCost = 256

// JobCost estimates a job's tokens before it runs: its prompt's, taken as
// a quarter of the bytes the job's request takes in its encoding (English
// text runs about four bytes a token; the estimate needs no tokenizer and
// no decode on the worker), the envelope (id, deadline, reply subject)
// left out, and its answer's bound, or maxTokens when it sets none. The
// fair share charges it when the job is pulled and corrects it once the
// job is done.
func JobCost(job genq.Job, encodedBytes, maxTokens int) int64 {
	envelope, _ := json.Marshal(job.Envelope)
	request := max(encodedBytes-len(envelope), 0) + len(job.Text)
	answer := job.MaxNewTokens()
	if answer <= 0 {
		answer = maxTokens
	}
	return int64(request/4 + len(job.PromptTokenIDs) + max(answer, 0))
}
