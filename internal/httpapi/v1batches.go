package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// OpenAI's Batch API: POST /v1/batches runs the requests of an uploaded
// JSONL file, each a job on the batch lane (so a batch never slows
// interactive traffic, and any worker runs it); GET /v1/batches/{id}
// reads its progress, POST /v1/batches/{id}/cancel stops it, GET
// /v1/batches lists them. Its output and error files are files of the
// Files API.
//
// A batch's progress is kept in its record in JetStream (BatchStore), not
// in an api's memory. Every api runs the batches whose record no other
// api holds (runBatches): it takes a lease in the record, renewed as it
// goes, queues the batch's requests a window at a time under ids made
// from the batch's (so a request queued twice is kept once, and one that
// has run is not run again), counts their outcomes in the results store,
// and at the end writes the output and error files and the final status.
// An api that stops leaves its lease to lapse, and another carries the
// batch on from its record.

// batchRecord is a batch as kept: the object clients read, and how far
// its run has got.
type batchRecord struct {
	Batch openai.Batch `json:"batch"`
	Run   batchRun     `json:"run"`
}

type batchRun struct {
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
	Webhook string         `json:"webhook,omitempty"`
	// Tenant is the tenant of the key that created the batch, whose
	// usage its answers are.
	Tenant string `json:"tenant,omitempty"`
	// Trace is the W3C trace context of the request that created the
	// batch, which each request's own trace links to (batchLineSpan).
	Trace map[string]string `json:"trace,omitempty"`
}

// lineJobID is the job id of a batch's request at index i.
func lineJobID(batchID string, i int) string { return batchID + "_" + strconv.Itoa(i) }

// lineJobIDs are the ids of the count jobs of a batch's request at index
// i, one per answer it asks for: the first is lineJobID, the k-th after it
// lineJobID and "-k". Any api derives the same ones, to read, cancel or
// queue again what another api queued.
func lineJobIDs(batchID string, i, count int) []string {
	ids := make([]string, max(count, 1))
	for k := range ids {
		ids[k] = lineJobID(batchID, i)
		if k > 0 {
			ids[k] += "-" + strconv.Itoa(k)
		}
	}
	return ids
}

// readBatch is batch id's record and its revision.
func readBatch(ctx context.Context, store batchRecords, id string) (batchRecord, uint64, error) {
	raw, rev, err := store.Batch(ctx, id)
	if err != nil {
		return batchRecord{}, 0, err
	}
	var rec batchRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return batchRecord{}, 0, fmt.Errorf("batch %s: read its record: %w", id, err)
	}
	return rec, rev, nil
}

// writeBatch writes a batch's record over revision rev (0: a new one).
func writeBatch(ctx context.Context, store batchRecords, rec batchRecord, rev uint64) (uint64, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	return store.PutBatch(ctx, rec.Batch.ID, raw, rev)
}

// kickBatches wakes the batch runner, so a new or cancelled batch moves at
// once rather than at its next round.
func (s *Server) kickBatches() {
	select {
	case s.batchKick <- struct{}{}:
	default:
	}
}

func now() *int64 {
	t := time.Now().Unix()
	return &t
}

func (s *Server) handleBatchCreate(w http.ResponseWriter, r *http.Request) {
	body, ok := s.v1RequestBody(w, r)
	if !ok {
		return
	}
	var req openai.BatchCreate
	err := openai.Decode(body, &req)
	if err == nil {
		err = req.Check()
	}
	if err == nil && req.Webhook != "" {
		err = s.cfg.Async.webhooks().Check(req.Webhook)
	}
	if err == nil {
		_, err = s.batches.File(r.Context(), req.InputFileID)
		if genq.ErrorCode(err) == genq.NotFound {
			err = genq.Errorf(genq.NotFound, "no file %s: upload it with POST /v1/files first", req.InputFileID)
		}
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	// A batch counts against rpm; its answers are metered as they come (meterBatchLine).
	if err := s.admit(w, r, admission{deadline: time.Now().Add(s.cfg.JobTimeout), queued: true}); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	created := time.Now().Unix()
	expires := created + int64(s.cfg.Batches.withDefaults().Expiry/time.Second)
	b := openai.Batch{ID: "batch_" + s.newID(), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
		CompletionWindow: req.CompletionWindow, Status: openai.BatchValidating, CreatedAt: created, ExpiresAt: &expires,
		Metadata: req.Metadata}
	run := batchRun{Webhook: req.Webhook, Tenant: tenantOf(r), Trace: traceCarrier(r.Context())}
	if _, err := writeBatch(r.Context(), s.batches, batchRecord{Batch: b, Run: run}, 0); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	s.log.Info("batch created", "batch_id", b.ID, "input_file_id", b.InputFileID, "endpoint", b.Endpoint)
	s.kickBatches()
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) handleBatchGet(w http.ResponseWriter, r *http.Request) {
	rec, _, err := readBatch(r.Context(), s.batches, chi.URLParam(r, "id"))
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, rec.Batch)
}

func (s *Server) handleBatchCancel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	for {
		rec, rev, err := readBatch(r.Context(), s.batches, id)
		if err != nil {
			writeV1Error(w, s.log, err)
			return
		}
		switch rec.Batch.Status {
		case openai.BatchValidating, openai.BatchInProgress:
		case openai.BatchCancelling, openai.BatchCancelled:
			writeJSON(w, http.StatusOK, rec.Batch)
			return
		default:
			writeV1Error(w, s.log, genq.Errorf(genq.Invalid, "batch %s is %s: only a validating or running batch can be cancelled", id, rec.Batch.Status))
			return
		}
		rec.Batch.Status, rec.Batch.CancellingAt = openai.BatchCancelling, now()
		_, err = writeBatch(r.Context(), s.batches, rec, rev)
		if errors.Is(err, genq.ErrChanged) {
			continue // the runner moved it on: read it again
		}
		if err != nil {
			writeV1Error(w, s.log, err)
			return
		}
		s.log.Info("batch cancelling", "batch_id", id)
		s.kickBatches()
		writeJSON(w, http.StatusOK, rec.Batch)
		return
	}
}

func (s *Server) handleBatchList(w http.ResponseWriter, r *http.Request) {
	ids, err := s.batches.BatchIDs(r.Context())
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	var all []openai.Batch
	for _, id := range ids {
		rec, _, err := readBatch(r.Context(), s.batches, id)
		if err == nil {
			all = append(all, rec.Batch)
		}
	}
	slices.SortFunc(all, func(a, b openai.Batch) int { // newest first
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(b.ID, a.ID)
	})
	q := r.URL.Query()
	pg, err := pageOf(all, q.Get("after"), q.Get("limit"), 100, func(b openai.Batch) string { return b.ID })
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	out := openai.List[openai.Batch]{Object: "list", Data: append([]openai.Batch{}, pg.items...), HasMore: pg.more}
	if len(out.Data) > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[len(out.Data)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
