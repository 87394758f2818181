package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/genq"
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
// id. The api's Jobs gives these routes when it implements this too
// (natsqueue.JobStore); otherwise they answer 503.
type AsyncJobs interface {
	Submit(ctx context.Context, job genq.Job) error
	// Outcome is the job's stored result, its error, or NotFound while
	// it has none.
	Outcome(ctx context.Context, id string) (*genq.ReceivedResult, error)
	CancelJob(id string)
	PutJobRecord(ctx context.Context, id string, record []byte) error
	// JobRecord is NotFound for a job with no record.
	JobRecord(ctx context.Context, id string) ([]byte, error)
	// Running reports whether a worker has started job id.
	Running(ctx context.Context, id string) (bool, error)
}

// Job types, the object names of the synchronous routes' answers.
const (
	jobChat       = "chat.completion"
	jobCompletion = "completion"
	jobImage      = "image"
)

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

type jobSubmit struct {
	Type    string          `json:"type"`
	Request json.RawMessage `json:"request"`
	Webhook string          `json:"webhook"`
}

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
}

type jobStatus struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Type    string   `json:"type,omitempty"`
	Status  string   `json:"status"`
	Created int64    `json:"created,omitempty"`
	Result  any      `json:"result,omitempty"`
	Error   *v1Error `json:"error,omitempty"`
}

func (s *Server) handleJobSubmit(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := s.requestBody(w, r, writeV1Error)
	if !ok {
		return
	}
	async, ok := s.jobs.(AsyncJobs)
	if !ok {
		writeV1Error(w, s.log, genq.Errorf(genq.Unavailable, "asynchronous jobs are not available on this server"))
		return
	}
	var req jobSubmit
	job := genq.Job{ID: s.newID(), Variant: s.cfg.Variant, Deadline: start.Add(s.cfg.Async.withDefaults().JobTimeout)}
	rec := jobRecord{Created: start.Unix(), Deadline: job.Deadline.Unix()}
	err := decodeV1(body, &req)
	if err == nil {
		rec.Type, rec.Webhook = req.Type, req.Webhook
		rec.Model, err = s.asyncJob(req, &job)
	}
	if err == nil && req.Webhook != "" {
		err = s.cfg.Async.webhooks().Check(req.Webhook)
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	rec.Logprobs, rec.Echo = job.Logprobs, job.Echo
	log := s.log.With("job_id", job.ID, "route", r.URL.Path, "type", req.Type)
	raw, _ := json.Marshal(rec)
	// The record first: a job whose outcome comes before its record would
	// read as one queued straight onto NATS.
	if err := async.PutJobRecord(r.Context(), job.ID, raw); err != nil {
		writeV1Error(w, log, err)
		return
	}
	if err := async.Submit(r.Context(), job); err != nil {
		log.Info("submit failed", "code", genq.ErrorCode(err), "err", err)
		writeV1Error(w, log, err)
		return
	}
	if req.Webhook != "" {
		// The api that accepted the job sends its webhook; it watches with
		// its own lifetime, not the request's.
		go s.watchJob(async, job.ID, rec, log)
	}
	w.Header().Set(HeaderJobID, job.ID)
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	writeJSON(w, http.StatusAccepted, jobStatus{ID: job.ID, Object: "job", Type: req.Type, Status: statusQueued, Created: rec.Created})
	log.Info("job queued", "webhook", req.Webhook != "")
}

// asyncJob fills job from the request of its type, checked as the
// synchronous route checks it, and returns the model asked for.
func (s *Server) asyncJob(req jobSubmit, job *genq.Job) (string, error) {
	if len(req.Request) == 0 {
		return "", genq.Errorf(genq.Invalid, "request is required: the body of the synchronous route")
	}
	var model string
	var err error
	switch req.Type {
	case jobChat, jobCompletion:
		if s.cfg.Variant.Kind() != genq.OutputText {
			return "", genq.Errorf(genq.Invalid, "variant %s makes images: type %s needs a text variant (A or B)", s.cfg.Variant, req.Type)
		}
		read := s.chatJob
		if req.Type == jobCompletion {
			read = s.completionJob
		}
		var params v1Params
		params, err = read(req.Request, job)
		model = params.Model
		if err == nil && params.choices() > 1 {
			err = genq.Errorf(genq.Invalid, "n must be 1 for an asynchronous job: submit one job per choice")
		}
	case jobImage:
		if s.cfg.Variant.Kind() != genq.OutputImage {
			return "", genq.Errorf(genq.Invalid, "variant %s makes text: type image needs the image variant (C)", s.cfg.Variant)
		}
		var ir imageRequest
		if err := decodeV1(req.Request, &ir); err != nil {
			return "", err
		}
		if ir.N != nil && *ir.N != 1 {
			return "", genq.Errorf(genq.Invalid, "n must be 1 for an asynchronous job: submit one job per image")
		}
		jobs, err := s.imageJobs(ir, job.Deadline)
		if err != nil {
			return "", err
		}
		id := job.ID
		*job = jobs[0]
		job.ID = id
		return ir.Model, nil
	default:
		return "", genq.Errorf(genq.Invalid, "type must be %s, %s or %s, not %q", jobChat, jobCompletion, jobImage, req.Type)
	}
	if err == nil && job.Stream {
		err = genq.Errorf(genq.Invalid, "stream is for the synchronous routes: an asynchronous job's result is read whole")
	}
	if err == nil {
		err = job.Validate()
	}
	return model, err
}

// chatJob and completionJob read the bodies of /v1/chat/completions and
// /v1/completions into a job.
func (s *Server) chatJob(body []byte, job *genq.Job) (v1Params, error) {
	var req chatRequest
	if err := decodeV1(body, &req); err != nil {
		return v1Params{}, err
	}
	if req.Echo {
		return v1Params{}, genq.Errorf(genq.Invalid, "echo is for /v1/completions: a chat answer does not repeat its messages")
	}
	msgs, err := s.messages(req.Messages)
	if err != nil {
		return v1Params{}, err
	}
	job.Messages = msgs
	job.Logprobs, job.TopLogprobs = req.Logprobs, req.TopLogprobs
	return req.v1Params, req.job(job)
}

func (s *Server) completionJob(body []byte, job *genq.Job) (v1Params, error) {
	var req completionRequest
	if err := decodeV1(body, &req); err != nil {
		return v1Params{}, err
	}
	if err := s.completionPrompt(req.Prompt, job); err != nil {
		return v1Params{}, err
	}
	if n := req.Logprobs; n != nil {
		job.Logprobs, job.TopLogprobs = true, *n
	}
	return req.v1Params, req.job(job)
}

func (s *Server) handleJobGet(w http.ResponseWriter, r *http.Request) {
	s.answerJob(w, r, false)
}

func (s *Server) handleJobCancel(w http.ResponseWriter, r *http.Request) {
	s.answerJob(w, r, true)
}

// answerJob answers GET and DELETE /v1/jobs/{id} with the job's status;
// DELETE first cancels a job that has no outcome yet.
func (s *Server) answerJob(w http.ResponseWriter, r *http.Request, cancel bool) {
	async, ok := s.jobs.(AsyncJobs)
	if !ok {
		writeV1Error(w, s.log, genq.Errorf(genq.Unavailable, "asynchronous jobs are not available on this server"))
		return
	}
	id := chi.URLParam(r, "id")
	if err := genq.ValidateJobID(id); err != nil {
		writeV1Error(w, s.log, genq.Errorf(genq.NotFound, "no job %q", id))
		return
	}
	log := s.log.With("job_id", id, "route", r.URL.Path)
	st, rec, err := s.jobStatus(r.Context(), async, id)
	if err == nil && cancel && (st.Status == statusQueued || st.Status == statusRunning) {
		async.CancelJob(id)
		if rec != nil {
			rec.Cancelled = true
			raw, _ := json.Marshal(rec)
			err = async.PutJobRecord(r.Context(), id, raw)
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

// jobStatus reads job id's status from its record and stored outcome. A
// job queued straight onto NATS has no record: it is known once its
// outcome is stored, and its result is given as the worker wrote it.
func (s *Server) jobStatus(ctx context.Context, async AsyncJobs, id string) (jobStatus, *jobRecord, error) {
	st := jobStatus{ID: id, Object: "job", Status: statusQueued}
	var rec *jobRecord
	raw, err := async.JobRecord(ctx, id)
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
	answer, err := async.Outcome(ctx, id)
	var appErr *genq.Error
	switch {
	case err == nil:
		defer answer.Body.Close()
		st.Status = statusSucceeded
		st.Result, err = s.renderResult(rec, id, answer)
		return st, rec, err
	case genq.ErrorCode(err) == genq.NotFound:
		if rec == nil {
			return st, nil, genq.Errorf(genq.NotFound, "no job %s", id)
		}
		if rec.Cancelled {
			st.Status = statusCancelled
			return st, rec, nil
		}
		running, err := async.Running(ctx, id)
		if running {
			st.Status = statusRunning
		}
		return st, rec, err
	case errors.As(err, &appErr) && appErr.Err != nil:
		return st, rec, err // the store failed, not the job
	case genq.ErrorCode(err) == genq.Canceled:
		st.Status = statusCancelled
	default:
		st.Status = statusFailed
	}
	code := genq.ErrorCode(err)
	st.Error = &v1Error{Message: genq.ErrorMessage(err), Type: v1ErrorType(code), Code: string(code)}
	return st, rec, nil
}

// renderResult gives a job's result in its type's shape, that of the
// synchronous route; a job without a record gets the worker's own JSON,
// or its image as the image route gives it.
func (s *Server) renderResult(rec *jobRecord, id string, answer *genq.ReceivedResult) (any, error) {
	if answer.ContentType == "image/png" {
		data, err := io.ReadAll(io.LimitReader(answer.Body, maxImageResult))
		if err != nil {
			return nil, fmt.Errorf("job %s: read its image: %w", id, err)
		}
		created := time.Now().Unix()
		if rec != nil {
			created = rec.Created
		}
		return imagesResponse{Created: created, Data: []imageData{{B64JSON: base64.StdEncoding.EncodeToString(data)}}}, nil
	}
	data, err := io.ReadAll(io.LimitReader(answer.Body, maxTextResult))
	if err != nil {
		return nil, fmt.Errorf("job %s: read its result: %w", id, err)
	}
	if rec == nil {
		return json.RawMessage(data), nil
	}
	out := textAnswer{jobID: id, created: rec.Created, model: s.modelOf(answer.Worker, rec.Model), logprobs: rec.Logprobs, echo: rec.Echo}
	if err := json.Unmarshal(data, &out.TextResult); err != nil {
		return nil, fmt.Errorf("job %s: read its text result: %w", id, err)
	}
	if rec.Type == jobCompletion {
		return renderCompletion(out), nil
	}
	return renderChat(out), nil
}

// renderChat and renderCompletion build OpenAI's objects from the answers
// of a request's choices, in order: the first names the object, the usage
// counts the prompt once and every choice's tokens.
func renderChat(answers ...textAnswer) any {
	first := answers[0]
	c := chatCompletion{ID: "chatcmpl-" + first.jobID, Object: "chat.completion", Created: first.created, Model: first.model,
		Usage: choicesUsage(answers)}
	for i, a := range answers {
		c.Choices = append(c.Choices, chatChoice{Index: i, Message: chatMessageOut{Role: genq.RoleAssistant, Content: a.GeneratedText},
			Logprobs: chatLogprobsOf(a.logprobEntries()), FinishReason: a.FinishReason})
	}
	return c
}

func renderCompletion(answers ...textAnswer) any {
	first := answers[0]
	c := completion{ID: "cmpl-" + first.jobID, Object: "text_completion", Created: first.created, Model: first.model,
		Usage: choicesUsage(answers)}
	for i, a := range answers {
		text, prompt := a.GeneratedText, []genq.TokenLogprob(nil)
		if a.echo {
			text, prompt = a.PromptText+a.GeneratedText, a.PromptLogprobs
		}
		c.Choices = append(c.Choices, completionChoice{Index: i, Text: text,
			Logprobs: completionLogprobsOf(text, prompt, a.logprobEntries(), a.PromptText), FinishReason: a.FinishReason})
	}
	return c
}

// choicesUsage counts the prompt once, as it is one prompt, and the
// tokens of every choice.
func choicesUsage(answers []textAnswer) v1Usage {
	u := answers[0].usage()
	for _, a := range answers[1:] {
		u.CompletionTokens += a.usage().CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// watchJob waits for the outcome of a job with a webhook and delivers it.
// It lives in the api that accepted the job: if that api stops first, the
// webhook is not sent, and the job's status stays readable by GET.
func (s *Server) watchJob(async AsyncJobs, id string, rec jobRecord, log *slog.Logger) {
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
		st, _, err := s.jobStatus(ctx, async, id)
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
