package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/batchrun"
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
// The batches themselves are run by internal/batchrun, which asks these
// routes (batchLines) how to queue and answer each request.

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
	// A batch counts against rpm; its answers are metered as they come (meterQueued).
	if err := s.admit(w, r, admission{deadline: time.Now().Add(s.cfg.JobTimeout), queued: true}); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	created := time.Now().Unix()
	expires := created + int64(s.cfg.Batches.withDefaults().Expiry/time.Second)
	b := openai.Batch{ID: "batch_" + s.newID(), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
		CompletionWindow: req.CompletionWindow, Status: openai.BatchValidating, CreatedAt: created, ExpiresAt: &expires,
		Metadata: req.Metadata}
	run := batchrun.Progress{Webhook: req.Webhook, Tenant: tenantOf(r), Trace: traceCarrier(r.Context())}
	if _, err := batchrun.Write(r.Context(), s.batches, batchrun.Record{Batch: b, Run: run}, 0); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	s.log.Info("batch created", "batch_id", b.ID, "input_file_id", b.InputFileID, "endpoint", b.Endpoint)
	s.kickBatches()
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) handleBatchGet(w http.ResponseWriter, r *http.Request) {
	rec, _, err := batchrun.Read(r.Context(), s.batches, chi.URLParam(r, "id"))
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, rec.Batch)
}

func (s *Server) handleBatchCancel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	for {
		rec, rev, err := batchrun.Read(r.Context(), s.batches, id)
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
		_, err = batchrun.Write(r.Context(), s.batches, rec, rev)
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
		rec, _, err := batchrun.Read(r.Context(), s.batches, id)
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
