package batchrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// Record is a batch as kept: the object clients read, and how far
// its run has got.
type Record struct {
	Batch openai.Batch `json:"batch"`
	Run   Progress     `json:"run"`
}

// Progress is how far a batch's run has got, and who runs it.
type Progress struct {
	// Lines is how many requests the input file holds; Queued how many of
	// them, from the first, have been queued.
	Lines  int `json:"lines"`
	Queued int `json:"queued"`
	// Owner is the api that holds the batch until Lease (Unix ms).
	Owner string `json:"owner,omitempty"`
	Lease int64  `json:"lease,omitempty"`
	// CancelSent: the queued requests have been told to stop.
	CancelSent bool `json:"cancel_sent,omitempty"`
	// Refused are the requests refused when their turn came (the
	// workers' limits changed since the batch was checked), by index.
	Refused map[int]string `json:"refused,omitempty"`
	// RefusedModel marks those of Refused refused for their model (one the
	// catalogue does not hold), answered 404 as the route answers them.
	// Apart from Refused so that records kept before it still read.
	RefusedModel map[int]bool `json:"refused_model,omitempty"`
	Webhook      string       `json:"webhook,omitempty"`
	// Tenant is the tenant of the key that created the batch, whose
	// usage its answers are.
	Tenant string `json:"tenant,omitempty"`
	// Trace is the W3C trace context of the request that created the
	// batch, which each request's own trace links to (Routes.LineSpan).
	Trace map[string]string `json:"trace,omitempty"`
}

// refuse keeps request i's refusal, which its output line reports.
func (p *Progress) refuse(i int, err error) {
	if p.Refused == nil {
		p.Refused = map[int]string{}
	}
	p.Refused[i] = genq.ErrorMessage(err)
	if genq.IsModelNotFound(err) {
		if p.RefusedModel == nil {
			p.RefusedModel = map[int]bool{}
		}
		p.RefusedModel[i] = true
	}
}

// refusal is request i's refusal, nil when it was queued.
func (p *Progress) refusal(i int) error {
	msg, ok := p.Refused[i]
	switch {
	case !ok:
		return nil
	case p.RefusedModel[i]:
		return &genq.Error{Code: genq.NotFound, Field: "model", Message: msg}
	}
	return genq.Errorf(genq.Invalid, "%s", msg)
}

// isLineRefusal tells a request the route would refuse (its fields, or
// its model) from a queue that could not take it now.
func isLineRefusal(err error) bool {
	return genq.ErrorCode(err) == genq.Invalid || genq.IsModelNotFound(err)
}

// LineJobID is the job id of a batch's request at index i.
func LineJobID(batchID string, i int) string { return batchID + "_" + strconv.Itoa(i) }

// LineJobIDs are the ids of the count jobs of a batch's request at index
// i, one per answer it asks for: the first is LineJobID, the k-th after it
// LineJobID and "-k". Any api derives the same ones, to read, cancel or
// queue again what another api queued.
func LineJobIDs(batchID string, i, count int) []string {
	ids := make([]string, max(count, 1))
	for k := range ids {
		ids[k] = LineJobID(batchID, i)
		if k > 0 {
			ids[k] += "-" + strconv.Itoa(k)
		}
	}
	return ids
}

// Read is batch id's record and its revision.
func Read(ctx context.Context, store Store, id string) (Record, uint64, error) {
	raw, rev, err := store.Batch(ctx, id)
	if err != nil {
		return Record{}, 0, err
	}
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Record{}, 0, fmt.Errorf("batch %s: read its record: %w", id, err)
	}
	return rec, rev, nil
}

// Write writes a batch's record over revision rev (0: a new one).
func Write(ctx context.Context, store Store, rec Record, rev uint64) (uint64, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	return store.PutBatch(ctx, rec.Batch.ID, raw, rev)
}

// now is the time of a batch's change of status, as its object keeps it.
func now() *int64 {
	t := time.Now().Unix()
	return &t
}
