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
}

func newFairShare() *fairShare {
	return &fairShare{served: map[string]float64{}, waiting: map[string]bool{}}
}

// candidate is a queue with jobs waiting, as order sees it.
type candidate struct {
	tenant string
	queue  *tenantQueue
}

// order sorts the candidates (tenants with jobs waiting) in the order a
// free slot should try them: least virtual time first, ties by name so
// every worker breaks them alike.
func (f *fairShare) order(cs []candidate) []candidate {
	f.mu.Lock()
	defer f.mu.Unlock()
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
	if weight <= 0 {
		weight = 1
	}
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
	f.waiting[tenant] = true
}

// settle corrects a charge once a job's real cost is known.
func (f *fairShare) settle(tenant string, weight float64, charged, real int64) {
	if weight <= 0 {
		weight = 1
	}
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
