package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// POST /v1/embeddings: OpenAI's embeddings route. A request is one job on
// the queue of the embedding model it names (the catalogue's), whatever
// its number of inputs: the worker that takes it computes its inputs in
// the same engine steps as those of the other jobs it holds.

// maxEmbeddingResult bounds an embedding result read into memory: 2,048
// vectors of 1,024 floats in JSON are about 25 MB.
const maxEmbeddingResult = 64 << 20

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := s.v1RequestBody(w, r)
	if !ok {
		return
	}
	var req openai.EmbeddingRequest
	_, span := s.startSpan(r.Context(), "decode request")
	job, model, err := s.embeddingJob(body, &req, start)
	var jobs []genq.Job
	if err == nil {
		jobs = []genq.Job{job}
	}
	endDecode(span, jobs, err == nil, attribute.Int("genq.inputs", len(job.Inputs)))
	if err == nil {
		err = s.admit(w, r, admission{model: req.Model, resolved: model, cost: tenant.Cost{Tokens: embeddingReserve(job)}, deadline: job.Deadline})
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	log := s.log.With("job_id", job.ID, "route", r.URL.Path, "inputs", len(job.Inputs))
	w.Header().Set(HeaderJobID, job.ID)
	ctx, cancel := context.WithDeadline(r.Context(), job.Deadline)
	defer cancel()
	res, err := s.runJob(ctx, job, start, log, s.jobs.Run)
	if err != nil {
		writeV1Error(w, log, err)
		return
	}
	defer res.Body.Close()
	out, err := readEmbeddingResult(res)
	if err != nil {
		writeV1Error(w, log, genq.WrapError(genq.Internal, err, "the worker's result could not be read"))
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	name := s.answerModel(model, res.Worker, cmp.Or(req.Model, out.Model))
	writeJSON(w, http.StatusOK, openai.NewEmbeddingResponse(out, name, req.EncodingFormat))
	logDone(log, start, res, "tokens", out.Usage.PromptTokens)
}

// embeddingJob reads an embedding request into its job on the queue of
// the model it names (the catalogue's default embedding model without
// one), or says why not.
func (s *Server) embeddingJob(body []byte, req *openai.EmbeddingRequest, start time.Time) (genq.Job, genq.Model, error) {
	if err := openai.Decode(body, req); err != nil {
		return genq.Job{}, genq.Model{}, err
	}
	m, err := s.resolveModel(req.Model, genq.KindEmbedding)
	if err != nil {
		return genq.Job{}, m, err
	}
	tmpl := genq.Job{Envelope: genq.Envelope{ID: s.newID(), Variant: m.Queue, Deadline: start.Add(s.cfg.JobTimeout)}}
	job, err := openai.EmbeddingJob(*req, tmpl)
	return job, m, err
}

// embeddingReserve is the tokens an embedding job reserves of its
// tenant's limits until its answer says how many it took: its token ids,
// and a token for every 4 bytes of its texts (English's usual) with the
// special tokens around each.
func embeddingReserve(job genq.Job) int64 {
	var n int64
	for _, in := range job.Inputs {
		n += int64(len(in.TokenIDs))
		if in.Text != "" {
			n += int64(len(in.Text)/4 + 2)
		}
	}
	return n
}

// readEmbeddingResult reads and decodes an embedding job's result.
func readEmbeddingResult(res *genq.ReceivedResult) (genq.EmbeddingResult, error) {
	var out genq.EmbeddingResult
	data, err := io.ReadAll(io.LimitReader(res.Body, maxEmbeddingResult))
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		return out, fmt.Errorf("read the embedding result: %w", err)
	}
	return out, nil
}

// embeddingLineJobs is the one job of a batch's embedding request at
// index i, checked as the route checks it.
func (s *Server) embeddingLineJobs(b openai.Batch, l openai.BatchLine, i int) ([]genq.Job, error) {
	var req openai.EmbeddingRequest
	job, _, err := s.embeddingJob(l.Body, &req, time.Now())
	if err != nil {
		return nil, err
	}
	job.ID = batchrun.LineJobID(b.ID, i)
	job.Deadline = time.Now().Add(s.cfg.Async.withDefaults().JobTimeout)
	return []genq.Job{job}, nil
}

// embeddingOutcome is a batch's embedding request's answer, as the route
// gives it, from its job's outcome, and the tokens it used; a NotFound
// error while it has none. model is the catalogue's name of its model.
func (s *Server) embeddingOutcome(ctx context.Context, id string, request json.RawMessage, model string) (any, int, tenant.Usage, error) {
	res, err := s.async.Outcome(ctx, id)
	if genq.ErrorCode(err) == genq.NotFound || batchrun.IsStoreError(err) {
		return nil, 0, tenant.Usage{}, err
	}
	if err != nil {
		return lineFailed(err)
	}
	defer res.Body.Close()
	out, err := readEmbeddingResult(res)
	if err != nil {
		return lineFailed(genq.WrapError(genq.Internal, err, "the worker's result could not be read"))
	}
	var req openai.EmbeddingRequest
	_ = json.Unmarshal(request, &req) // checked when the batch was
	name := cmp.Or(req.Model, out.Model)
	if s.namedModels() && model != "" {
		name = model
	}
	used := tenant.Usage{Model: name, PromptTokens: int64(out.Usage.PromptTokens)}
	return openai.NewEmbeddingResponse(out, name, req.EncodingFormat), http.StatusOK, used, nil
}
