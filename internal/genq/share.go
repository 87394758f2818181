package genq

import "context"

// Share names whom a job's work is counted to on the queue: its tenant,
// whose waiting jobs workers serve in turn with other tenants', in
// proportion to Weight and by tokens (docs/protocol.md §11). A job
// without one is queued as before, on its class's shared subject.
type Share struct {
	Tenant string
	// Weight is the tenant's share against others'; 0 counts as 1.
	Weight float64
	// MaxTokens bounds the answer of a job that sets no bound of its own
	// (the workers' limit): the job's cost counts it.
	MaxTokens int
}

// WeightOrOne is the share's weight, a weight of 0 (or less) counting as 1.
func (s Share) WeightOrOne() float64 {
	if s.Weight <= 0 {
		return 1
	}
	return s.Weight
}

type shareKey struct{}

// WithShare carries s with ctx to where its jobs are queued. It travels in
// the context because the tenant is the request's, not the job's: the
// job's body stays what workers and producers of every version read.
func WithShare(ctx context.Context, s Share) context.Context {
	return context.WithValue(ctx, shareKey{}, s)
}

// ShareOf is the share WithShare put in ctx; ok is false without one.
func ShareOf(ctx context.Context) (s Share, ok bool) {
	s, ok = ctx.Value(shareKey{}).(Share)
	return s, ok && s.Tenant != ""
}

// TenantQueue is one tenant's jobs of one class on one queue, as its
// consumer holds them: waiting for a worker, and running on one (taken,
// not yet done).
type TenantQueue struct {
	Tenant  string  `json:"tenant"`
	Queue   Variant `json:"queue"`
	Class   string  `json:"class"` // interactive or batch
	Waiting uint64  `json:"waiting"`
	Running uint64  `json:"running"`
}
