package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/webhook"
)

// Asynchronous jobs over HTTP: POST /v1/jobs queues a chat, completion or
// image request and answers 202 with the job's id at once; GET
// /v1/jobs/{id} reads its status and, once done, its result in the shape
// the synchronous route gives; DELETE /v1/jobs/{id} cancels it. The job is
// an ordinary queued job: its outcome is the stored result every worker
// writes (GENQ_RESULTS, kept for RESULT_TTL), and a small record beside it
// (GENQ_JOB_RECORDS) keeps what the api needs to render it.

// AsyncJobs queues jobs without waiting for them and answers for them by
// id (natsqueue.JobStore).
type AsyncJobs interface {
	Submit(ctx context.Context, job genq.Job) error
	// Outcome is the job's stored result, its error, or NotFound while
	// it has none.
	Outcome(ctx context.Context, id string) (*genq.ReceivedResult, error)
	CancelJob(id string)
	PutJobRecord(ctx context.Context, id string, record []byte) error
	// JobRecord is NotFound for a job with no record.
	JobRecord(ctx context.Context, id string) ([]byte, error)
	// Running reports whether a worker has started job id, and how far
	// it has got when its worker counts.
	Running(ctx context.Context, id string) (bool, genq.Progress, error)
	// JobIDs lists the jobs that have a record.
	JobIDs(ctx context.Context) ([]string, error)
	// UpdateJobRecord replaces a record by what update makes of it,
	// genq.ErrChanged when another write came first.
	UpdateJobRecord(ctx context.Context, id string, update func(record []byte) ([]byte, error)) error
}

// Job statuses. A job is queued until a worker marks it running (see
// natsqueue.Delivery.MarkRunning), and running until its outcome is
// stored. A job queued straight onto NATS reads queued until then.
const (
	statusQueued    = "queued"
	statusRunning   = "running"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusCancelled = "cancelled"
)

// AsyncConfig sets up POST /v1/jobs and its webhooks.
type AsyncConfig struct {
	// JobTimeout is an asynchronous job's deadline, queueing included.
	JobTimeout time.Duration
	// PollEvery is how often the api that accepted a job with a webhook
	// looks for its outcome in the results store.
	PollEvery time.Duration
	// WebhookSecret keys the HMAC-SHA256 signature of every webhook;
	// without one, webhooks are refused. It never reaches the logs.
	WebhookSecret string
	// WebhookAllow lists the hosts webhooks may go to (exact names or IP
	// literals, no wildcards); without any, webhooks are refused.
	WebhookAllow []string
	// WebhookAllowPrivate lets webhooks reach loopback, private,
	// link-local and other non-public addresses: for tests and closed
	// networks only.
	WebhookAllowPrivate bool
	// WebhookAttempts bounds the deliveries of one webhook; the waits
	// between them start at WebhookBackoff and double.
	WebhookAttempts int
	WebhookBackoff  time.Duration
	// WebhookTimeout bounds one delivery.
	WebhookTimeout time.Duration
}

// Defaults of AsyncConfig. An asynchronous job lives as long as a queued
// job may (JOB_MAX_AGE's default).
const (
	DefaultAsyncJobTimeout = time.Hour
	DefaultWebhookAttempts = webhook.DefaultAttempts
)

func (c AsyncConfig) withDefaults() AsyncConfig {
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultAsyncJobTimeout)
	c.PollEvery = cmp.Or(c.PollEvery, 500*time.Millisecond)
	return c
}

func (c AsyncConfig) webhooks() webhook.Sender {
	return webhook.New(webhook.Config{Secret: c.WebhookSecret, Allow: c.WebhookAllow, AllowPrivate: c.WebhookAllowPrivate,
		Attempts: c.WebhookAttempts, Backoff: c.WebhookBackoff, Timeout: c.WebhookTimeout})
}

// HeaderSignature signs a webhook (webhook.Sign).
const HeaderSignature = webhook.HeaderSignature

// Sign returns the Genq-Signature value of body at t.
func Sign(secret string, t time.Time, body []byte) string { return webhook.Sign(secret, t, body) }

// jobRecord is what the api keeps of a job it queued for later.
type jobRecord struct {
	Type      string `json:"type"`
	Model     string `json:"model,omitempty"` // as asked; answers name the worker's
	Created   int64  `json:"created"`
	Deadline  int64  `json:"deadline"`
	Webhook   string `json:"webhook,omitempty"`
	Cancelled bool   `json:"cancelled,omitempty"`
	Logprobs  bool   `json:"logprobs,omitempty"` // asked for: an empty answer has an empty list
	Echo      bool   `json:"echo,omitempty"`
	// Tenant is the tenant of the key that queued the job, whose usage
	// its answer is; Metered once it has been counted (meterJob).
	Tenant  string `json:"tenant,omitempty"`
	Metered bool   `json:"metered,omitempty"`
	// EncodingFormat is an embedding job's encoding_format (float or
	// base64), which its answer is rendered in.
	EncodingFormat string `json:"encoding_format,omitempty"`

	// asked and resolved are the model the request names and the one it
	// gets, for the key's models= check; not stored.
	asked    string
	resolved genq.Model
}

type jobStatus struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Type    string        `json:"type,omitempty"`
	Status  string        `json:"status"`
	Created int64         `json:"created,omitempty"`
	Result  any           `json:"result,omitempty"`
	Error   *openai.Error `json:"error,omitempty"`
	// Progress is how far a running job has got, when its worker counts
	// (an image's denoising steps).
	Progress *genq.Progress `json:"progress,omitempty"`
}

func (s *Server) handleJobSubmit(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := s.v1RequestBody(w, r)
	if !ok {
		return
	}
	if s.async == nil {
		writeV1Error(w, s.log, errNoAsync)
		return
	}
	job, rec, err := s.asyncJob(body, start)
	if err == nil && rec.Webhook != "" {
		err = s.cfg.Async.webhooks().Check(rec.Webhook)
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	// A queued job counts as a request; its answer's tokens are metered
	// when its outcome is stored (meterStored), or first read (meterJob).
	rec.Tenant = tenantOf(r)
	if err := s.admit(w, r, admission{model: rec.asked, resolved: rec.resolved, deadline: job.Deadline, queued: true}); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	log := s.log.With("job_id", job.ID, "route", r.URL.Path, "type", rec.Type)
	raw, _ := json.Marshal(rec)
	// The record first: a job whose outcome comes before its record would
	// read as one queued straight onto NATS.
	if err := s.async.PutJobRecord(r.Context(), job.ID, raw); err != nil {
		writeV1Error(w, log, err)
		return
	}
	if err := s.async.Submit(s.withShare(r.Context()), job); err != nil {
		log.Info("submit failed", "code", genq.ErrorCode(err), "err", err)
		writeV1Error(w, log, err)
		return
	}
	if rec.Webhook != "" {
		// The api that accepted the job sends its webhook; it watches with
		// its own lifetime, not the request's.
		go s.watchJob(job.ID, rec, log)
	}
	w.Header().Set(HeaderJobID, job.ID)
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	writeJSON(w, http.StatusAccepted, jobStatus{ID: job.ID, Object: "job", Type: rec.Type, Status: statusQueued, Created: rec.Created})
	log.Info("job queued", "webhook", rec.Webhook != "")
}

// asyncJob reads a POST /v1/jobs body into its job and record, checked as
// its synchronous route checks a request.
func (s *Server) asyncJob(body []byte, start time.Time) (genq.Job, jobRecord, error) {
	deadline := start.Add(s.cfg.Async.withDefaults().JobTimeout)
	var peek openai.JobSubmit
	if json.Unmarshal(body, &peek) == nil && peek.Type == openai.JobEmbedding {
		return s.asyncEmbeddingJob(peek, start, deadline)
	}
	job := genq.Job{Envelope: genq.Envelope{ID: s.newID(), Variant: s.cfg.Variant, Deadline: deadline}}
	m, err := s.jobModel(body)
	if err != nil {
		return job, jobRecord{}, err
	}
	job.Variant = m.Queue
	req, asked, err := openai.DecodeJobSubmit(body, s.limits(), &job)
	if err == nil {
		err = s.workerLimitsOf(job.Variant).Check(job)
	}
	if err == nil {
		err = s.checkConstraint(job)
	}
	model := asked
	if s.namedModels() {
		model = m.Name
	}
	rec := jobRecord{Type: req.Type, Model: model, Created: start.Unix(), Deadline: deadline.Unix(), Webhook: req.Webhook,
		Logprobs: job.Logprobs, Echo: job.Echo, asked: asked, resolved: m}
	return job, rec, err
}

// asyncEmbeddingJob is asyncJob for an embeddings request: one job on its
// model's queue, as POST /v1/embeddings queues it, whose record keeps the
// encoding its answer is rendered in.
func (s *Server) asyncEmbeddingJob(req openai.JobSubmit, start, deadline time.Time) (genq.Job, jobRecord, error) {
	if len(req.Request) == 0 {
		return genq.Job{}, jobRecord{}, genq.Errorf(genq.Invalid, "request is required: the body of the synchronous route")
	}
	var er openai.EmbeddingRequest
	job, m, err := s.embeddingJob(req.Request, &er, start)
	job.Deadline = deadline
	model := er.Model
	if s.namedModels() {
		model = m.Name
	}
	rec := jobRecord{Type: req.Type, Model: model, Created: start.Unix(), Deadline: deadline.Unix(), Webhook: req.Webhook,
		EncodingFormat: er.EncodingFormat, asked: er.Model, resolved: m}
	return job, rec, err
}

// errNoAsync answers the /v1/jobs routes on a server without asynchronous
// jobs.
var errNoAsync = genq.Errorf(genq.Unavailable, "asynchronous jobs are not available on this server")

func (s *Server) handleJobGet(w http.ResponseWriter, r *http.Request) {
	s.answerJob(w, r, false)
}

func (s *Server) handleJobCancel(w http.ResponseWriter, r *http.Request) {
	s.answerJob(w, r, true)
}

// answerJob answers GET and DELETE /v1/jobs/{id} with the job's status;
// DELETE first cancels a job that has no outcome yet.
func (s *Server) answerJob(w http.ResponseWriter, r *http.Request, cancel bool) {
	if s.async == nil {
		writeV1Error(w, s.log, errNoAsync)
		return
	}
	id := chi.URLParam(r, "id")
	if err := genq.ValidateJobID(id); err != nil {
		writeV1Error(w, s.log, genq.Errorf(genq.NotFound, "no job %q", id))
		return
	}
	log := s.log.With("job_id", id, "route", r.URL.Path)
	st, rec, err := s.jobStatus(r.Context(), id, true)
	if err == nil && cancel && (st.Status == statusQueued || st.Status == statusRunning) {
		s.async.CancelJob(id)
		if rec != nil {
			rec.Cancelled = true
			raw, _ := json.Marshal(rec)
			err = s.async.PutJobRecord(r.Context(), id, raw)
		}
		st.Status = statusCancelled
		log.Info("job cancelled")
	}
	if err != nil {
		writeV1Error(w, log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// jobStatus reads job id's status from its record and stored outcome, its
// result rendered when withResult. A job queued straight onto NATS has no
// record: it is known once its outcome is stored, and its result is given
// as the worker wrote it.
func (s *Server) jobStatus(ctx context.Context, id string, withResult bool) (jobStatus, *jobRecord, error) {
	st := jobStatus{ID: id, Object: "job", Status: statusQueued}
	var rec *jobRecord
	raw, err := s.async.JobRecord(ctx, id)
	switch {
	case err == nil:
		rec = &jobRecord{}
		if err := json.Unmarshal(raw, rec); err != nil {
			return st, nil, fmt.Errorf("job %s: read its record: %w", id, err)
		}
		st.Type, st.Created = rec.Type, rec.Created
	case genq.ErrorCode(err) != genq.NotFound:
		return st, nil, err
	}
	res, err := s.async.Outcome(ctx, id)
	var appErr *genq.Error
	switch {
	case err == nil:
		defer res.Body.Close()
		st.Status = statusSucceeded
		if withResult {
			var used tenant.Usage
			if st.Result, used, err = s.renderResult(rec, id, res); err == nil {
				s.meterJob(ctx, id, rec, used)
			}
		}
		return st, rec, err
	case genq.ErrorCode(err) == genq.NotFound:
		if rec == nil {
			return st, nil, genq.Errorf(genq.NotFound, "no job %s", id)
		}
		if rec.Cancelled {
			st.Status = statusCancelled
			return st, rec, nil
		}
		running, progress, err := s.async.Running(ctx, id)
		if running {
			st.Status = statusRunning
			if progress.Total > 0 {
				st.Progress = &progress
			}
		}
		return st, rec, err
	case errors.As(err, &appErr) && appErr.Err != nil:
		return st, rec, err // the store failed, not the job
	case genq.ErrorCode(err) == genq.Canceled:
		st.Status = statusCancelled
	default:
		st.Status = statusFailed
	}
	jobErr := openai.ErrorOf(err)
	st.Error = &jobErr
	return st, rec, nil
}

// renderResult gives a job's result in its type's shape, that of the
// synchronous route; a job without a record gets the worker's own JSON,
// or its image as the image route gives it.
func (s *Server) renderResult(rec *jobRecord, id string, res *genq.ReceivedResult) (any, tenant.Usage, error) {
	if format, ok := strings.CutPrefix(res.ContentType, "image/"); ok {
		data, err := readImage(res)
		if err != nil {
			return nil, tenant.Usage{}, fmt.Errorf("job %s: %w", id, err)
		}
		created := time.Now().Unix()
		if rec != nil {
			created = rec.Created
		}
		return openai.ImagesResponse{Created: created, Data: []openai.ImageData{{B64JSON: base64.StdEncoding.EncodeToString(data)}},
			OutputFormat: format}, tenant.Usage{Model: recordedModel(rec), Images: 1}, nil
	}
	if rec != nil && rec.Type == openai.JobEmbedding {
		out, err := readEmbeddingResult(res)
		if err != nil {
			return nil, tenant.Usage{}, fmt.Errorf("job %s: %w", id, err)
		}
		name := s.recordModel(res.Worker, cmp.Or(rec.Model, out.Model))
		return openai.NewEmbeddingResponse(out, name, rec.EncodingFormat), tenant.Usage{Model: name, PromptTokens: int64(out.Usage.PromptTokens)}, nil
	}
	raw, text, err := readTextResult(res)
	if err != nil {
		return nil, tenant.Usage{}, fmt.Errorf("job %s: %w", id, err)
	}
	if rec == nil {
		return raw, tenant.Usage{}, nil
	}
	out := openai.TextResult{TextResult: text, JobID: id, Created: rec.Created, Model: s.recordModel(res.Worker, rec.Model),
		LogprobsAsked: rec.Logprobs, EchoAsked: rec.Echo}
	used := usageOf([]openai.TextResult{out})
	if rec.Type == openai.JobCompletion {
		return openai.RenderCompletion(out), used, nil
	}
	return openai.RenderChat(out), used, nil
}

// recordedModel is the model a job's record names, "" without one.
func recordedModel(rec *jobRecord) string {
	if rec == nil {
		return ""
	}
	return rec.Model
}

// OutcomeWatcher tells the api of each job's outcome as a worker stores
// it (natsqueue.JobStore), so that an asynchronous job is metered when it
// is done, not when, if ever, its outcome is read.
type OutcomeWatcher interface {
	WatchOutcomes(ctx context.Context, stored func(ctx context.Context, id string))
}

// meterStored meters the asynchronous job id, whose outcome was just
// stored, if its record says a tenant queued it and nobody has metered it
// yet: the record alone is read for any other (a synchronous job's large
// result, a job already read). Every api does this for every outcome;
// meterJob's compare-and-set lets one count it.
func (s *Server) meterStored(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, counterTimeout)
	defer cancel()
	raw, err := s.async.JobRecord(ctx, id)
	if err != nil {
		return // no record (not an asynchronous job), or the store away: a read meters it then
	}
	var rec jobRecord
	if json.Unmarshal(raw, &rec) != nil || rec.Tenant == "" || rec.Metered {
		return
	}
	if _, _, err := s.jobStatus(ctx, id, true); err != nil {
		s.log.Debug("a stored job's usage was not counted; a read counts it", "job_id", id, "err", err)
	}
}

// meterJob counts an answered asynchronous job for the tenant that queued
// it, once: the api that first sees its outcome stored (meterStored), or
// reads it when none did (NATS away meanwhile), marks its record metered
// with a compare-and-set, and only the one whose mark lands counts it, so
// polls and webhooks, on any api, do not count it again. (An api that
// dies between the mark and the count loses that one count: at most
// once, never twice.)
func (s *Server) meterJob(ctx context.Context, id string, rec *jobRecord, used tenant.Usage) {
	if rec == nil || rec.Tenant == "" || rec.Metered {
		return
	}
	err := s.async.UpdateJobRecord(ctx, id, func(raw []byte) ([]byte, error) {
		var cur jobRecord
		if err := json.Unmarshal(raw, &cur); err != nil {
			return nil, err
		}
		if cur.Metered {
			return nil, genq.ErrChanged
		}
		cur.Metered = true
		return json.Marshal(cur)
	})
	switch {
	case errors.Is(err, genq.ErrChanged):
		return // another read counted it
	case err != nil:
		s.log.Warn("an answered job's usage was not counted; the next read tries again", "job_id", id, "err", err)
		return
	}
	rec.Metered = true
	s.meterQueued(ctx, rec.Tenant, jobsRoute, used)
}

// watchJob waits for the outcome of a job with a webhook and delivers it.
// It lives in the api that accepted the job: if that api stops first, the
// webhook is not sent, and the job's status stays readable by GET.
func (s *Server) watchJob(id string, rec jobRecord, log *slog.Logger) {
	h := s.cfg.Async.webhooks()
	// The deadline, plus time for the outcome to be stored and the
	// deliveries to run their course.
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(rec.Deadline, 0).Add(5*time.Minute))
	defer cancel()
	tick := time.NewTicker(s.cfg.Async.withDefaults().PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Warn("no outcome by the job's deadline; webhook not sent")
			return
		case <-tick.C:
		}
		st, _, err := s.jobStatus(ctx, id, true)
		if err != nil {
			log.Debug("job status unavailable; polling again", "err", err)
			continue
		}
		if st.Status == statusQueued || st.Status == statusRunning {
			continue
		}
		body, err := json.Marshal(st)
		if err != nil {
			log.Error("could not encode the webhook", "err", err)
			return
		}
		if err := h.Send(ctx, rec.Webhook, id, body, log); err != nil {
			log.Warn("webhook not delivered", "err", err)
			return
		}
		log.Info("webhook delivered", "status", st.Status)
		return
	}
}

// jobModel resolves the model an asynchronous job's request names, by the
// kind its type makes; a body that does not read is the decoder's to
// refuse, on the variant's default.
func (s *Server) jobModel(body []byte) (genq.Model, error) {
	var peek struct {
		Type    string `json:"type"`
		Request struct {
			Model string `json:"model"`
		} `json:"request"`
	}
	kind := genq.KindChat
	if json.Unmarshal(body, &peek) != nil {
		return genq.SeedModel(s.cfg.Variant), nil
	}
	if peek.Type == openai.JobImage {
		kind = genq.KindImage
	}
	if _, ok := s.catalog.Default(kind); !ok {
		// The decoder refuses the type in the variant's words.
		return genq.SeedModel(s.cfg.Variant), nil
	}
	return s.resolveModel(peek.Request.Model, kind)
}

// recordModel names the model of a stored job's answer: the name its
// record kept, or with no catalogue the worker's file (modelOf).
func (s *Server) recordModel(workerID, recorded string) string {
	if s.namedModels() && recorded != "" {
		return recorded
	}
	return s.modelOf(workerID, recorded)
}
