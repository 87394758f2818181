package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// batchLines is what the batch runner asks of the routes a batch's
// requests stand for: reading a request as its route does, and answering
// it as its route would. The routes own both, so the runner holds none of
// their rules.
type batchLines struct{ s *Server }

func (r batchLines) LineJobs(b openai.Batch, l openai.BatchLine, i int, tenant string) ([]genq.Job, error) {
	if err := r.s.allowLine(b, l, r.s.tenantNamed(tenant)); err != nil {
		return nil, err
	}
	return r.s.lineJobs(b, l, i)
}

// allowLine refuses a batch's request whose model, named or the default
// it gets, the batch's tenant's key may not use, as admit refuses such a
// request on its route: the request alone fails, with a 404. A model the
// catalogue does not hold is lineJobs' to refuse.
func (s *Server) allowLine(b openai.Batch, l openai.BatchLine, t tenant.Tenant) error {
	var peek struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(l.Body, &peek) // a body that does not read is lineJobs' to refuse
	kind := genq.KindChat
	if b.Endpoint == openai.EmbeddingsEndpoint {
		kind = genq.KindEmbedding
	}
	m, err := s.resolveModel(peek.Model, kind)
	if err != nil || modelAllowed(t, peek.Model, m) {
		return nil
	}
	return deniedModel(cmp.Or(peek.Model, m.Name))
}

func (r batchLines) LineAnswers(b openai.Batch, l openai.BatchLine) int { return r.s.lineAnswers(b, l) }

func (r batchLines) LineModel(b openai.Batch, l openai.BatchLine) string { return r.s.lineModel(b, l) }

func (r batchLines) LineOutcome(ctx context.Context, endpoint string, ids []string, refused error, model string,
	request json.RawMessage) (any, int, tenant.Usage, error) {
	return r.s.lineOutcome(ctx, endpoint, ids, refused, model, request)
}

// ShareAs is the context under which a batch's request is queued for
// the tenant named (a batch keeps only its tenant's name).
func (r batchLines) ShareAs(ctx context.Context, name string) context.Context {
	return r.s.shareAs(ctx, r.s.tenantNamed(name))
}

func (r batchLines) MeterLine(ctx context.Context, name string, u tenant.Usage) {
	r.s.meterQueued(ctx, name, batchRoute, u)
}

func (r batchLines) LineSpan(ctx context.Context, rec batchrun.Record, i int) (context.Context, trace.Span) {
	return r.s.batchLineSpan(ctx, rec, i)
}

// lineJobs are the jobs of a batch's request at index i, one per answer
// it asks for (its prompts × n, in the order its route queues them),
// checked as its route checks a request.
func (s *Server) lineJobs(b openai.Batch, l openai.BatchLine, i int) ([]genq.Job, error) {
	if b.Endpoint == openai.EmbeddingsEndpoint {
		return s.embeddingLineJobs(b, l, i)
	}
	prompts, n, err := s.decodeLine(b, l)
	if err != nil {
		return nil, err
	}
	ids := batchrun.LineJobIDs(b.ID, i, len(prompts)*n)
	for k := range prompts {
		prompts[k].ID = ids[k*n]
	}
	if err := s.checkPrompts(prompts); err != nil {
		return nil, err
	}
	jobs := make([]genq.Job, 0, len(ids))
	for k, p := range prompts {
		next := k * n
		jobs = append(jobs, openai.ChoiceJobs(p, n, func() string { next++; return ids[next] })...)
	}
	return jobs, nil
}

// decodeLine reads a batch's request as its route does: its prompts (one,
// but for a list given to /v1/completions) and the answers it asks for
// each (n).
func (s *Server) decodeLine(b openai.Batch, l openai.BatchLine) ([]genq.Job, int, error) {
	tmpl := genq.Job{Envelope: genq.Envelope{Variant: s.kindQueue(genq.KindChat), Deadline: time.Now().Add(s.cfg.Async.withDefaults().JobTimeout)}}
	var decode textDecoder
	switch b.Endpoint {
	case "/v1/chat/completions":
		decode = oneJob(openai.DecodeChat)
	case "/v1/responses":
		decode = oneJob(openai.DecodeResponse)
	case "/v1/completions":
		decode = openai.DecodeCompletions
	default:
		return nil, 0, genq.Errorf(genq.Invalid, "a batch cannot run %s", b.Endpoint)
	}
	params, prompts, err := decode(l.Body, s.promptBytes(), tmpl)
	if err == nil && params.Stream {
		err = genq.Errorf(genq.Invalid, "stream: true is not supported in a batch")
	}
	if err == nil {
		// Each line names its model, as each request to its route does.
		var m genq.Model
		if m, err = s.resolveModel(params.Model, genq.KindChat); err == nil {
			onModel(prompts, m)
		}
	}
	return prompts, params.Choices(), err
}

// lineAnswers is how many jobs a batch's request at index i was queued
// as; one for a request that could not be read (refused, it has none).
func (s *Server) lineAnswers(b openai.Batch, l openai.BatchLine) int {
	if b.Endpoint == openai.EmbeddingsEndpoint {
		return 1 // one job, whatever its inputs
	}
	prompts, n, err := s.decodeLine(b, l)
	if err != nil {
		return 1
	}
	return len(prompts) * n
}

// lineOutcome is a request's outcome as its route would answer, from its
// jobs' (ids, one per answer): the body and status of its answer, or of
// its error (err non-nil), the first error of its jobs' if any failed.
func (s *Server) lineOutcome(ctx context.Context, endpoint string, ids []string, refused error, model string, request json.RawMessage) (any, int, tenant.Usage, error) {
	if refused != nil {
		return lineFailed(refused)
	}
	if endpoint == openai.EmbeddingsEndpoint {
		return s.embeddingOutcome(ctx, ids[0], request, model)
	}
	results := make([]openai.TextResult, 0, len(ids))
	for _, id := range ids {
		r, err := s.answerOf(ctx, id)
		if genq.ErrorCode(err) == genq.NotFound || batchrun.IsStoreError(err) {
			return nil, 0, tenant.Usage{}, err // no outcome yet, or the store is away
		}
		if err != nil {
			return lineFailed(err)
		}
		if s.namedModels() && model != "" {
			r.Model = model
		}
		results = append(results, r)
	}
	used := usageOf(results)
	switch endpoint {
	case "/v1/completions":
		return openai.RenderCompletion(results...), http.StatusOK, used, nil
	case "/v1/responses":
		r := results[0]
		rs := openai.ResponseStream(openai.Stream{JobID: r.JobID, Created: r.Created, Model: r.Model})
		return rs.Done(r.TextResult), http.StatusOK, used, nil
	}
	return openai.RenderChat(results...), http.StatusOK, used, nil
}

// lineFailed is a request's outcome when it failed with err: the body
// and status its route answers err with.
func lineFailed(err error) (any, int, tenant.Usage, error) {
	return openai.ErrorResponse{Error: openai.ErrorOf(err)}, statusOf(genq.ErrorCode(err)), tenant.Usage{}, err
}

// lineModel is the catalogue's name of the model a batch's request
// names, "" when the request does not read.
func (s *Server) lineModel(b openai.Batch, l openai.BatchLine) string {
	if b.Endpoint == openai.EmbeddingsEndpoint {
		jobs, err := s.embeddingLineJobs(b, l, 0)
		if err != nil {
			return ""
		}
		m, _ := s.catalog.ByQueue(jobs[0].Variant)
		return m.Name
	}
	prompts, _, err := s.decodeLine(b, l)
	if err != nil || len(prompts) == 0 {
		return ""
	}
	m, _ := s.catalog.ByQueue(prompts[0].Variant)
	return m.Name
}

// answerOf is job id's answer, or its error, or a NotFound one while it
// has none.
func (s *Server) answerOf(ctx context.Context, id string) (openai.TextResult, error) {
	res, err := s.async.Outcome(ctx, id)
	text, err := textOf(res, err)
	if err != nil {
		return openai.TextResult{}, err
	}
	return openai.TextResult{TextResult: text, JobID: id, Created: time.Now().Unix(), Model: s.modelOf(res.Worker, "")}, nil
}
