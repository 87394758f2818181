package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// POST /v1/chat/completions and POST /v1/completions: OpenAI's text
// routes, so that its SDKs and the tools built on them work against genq
// unchanged. Each choice of a request is a job of its own, run at once
// beside the others, answered whole or streamed.

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	if t, ok := s.textRequest(w, r, oneJob(openai.DecodeChat)); ok {
		answerText(s, w, r, t, openai.NewChatChunks(s.stream(t), t.jobs), openai.RenderChat)
	}
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	if t, ok := s.textRequest(w, r, openai.DecodeCompletions); ok {
		answerText(s, w, r, t, openai.CompletionChunks{Stream: s.stream(t)}, openai.RenderCompletion)
	}
}

// answerText runs a text request's jobs and answers with chunks as they
// come when it streams, else with render's object of their results. As
// for /generate, the deadline counts queueing, and a client that goes away
// cancels the jobs.
func answerText[T any](s *Server, w http.ResponseWriter, r *http.Request, t textRequest, chunks textChunks,
	render func(...openai.TextResult) T) {
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	if t.params.Stream {
		s.streamText(ctx, w, t, chunks)
		return
	}
	if results, ok := s.runTexts(ctx, w, t); ok {
		for _, r := range results {
			markUnchecked(w, t.log, r.TextResult)
		}
		writeJSON(w, http.StatusOK, render(results...))
	}
}

// textRequest is a decoded text request: the jobs of its prompts'
// choices, prompt by prompt, and what their answer needs.
type textRequest struct {
	jobs   []genq.Job
	params openai.Params
	// model is the catalogue's model the request named.
	model genq.Model
	start time.Time
	log   *slog.Logger
}

// textDecoder reads a text route's body into a job per prompt, each a copy
// of job.
type textDecoder func(body []byte, maxPrompt int, job genq.Job) (openai.Params, []genq.Job, error)

// oneJob is a textDecoder of a route that takes one prompt.
func oneJob(decode func(body []byte, maxPrompt int, job *genq.Job) (openai.Params, error)) textDecoder {
	return func(body []byte, maxPrompt int, job genq.Job) (openai.Params, []genq.Job, error) {
		params, err := decode(body, maxPrompt, &job)
		return params, []genq.Job{job}, err
	}
}

// textRequest reads and checks a text request, or refuses it in OpenAI's
// error shape.
func (s *Server) textRequest(w http.ResponseWriter, r *http.Request, decode textDecoder) (textRequest, bool) {
	return s.textRequestAs(w, r, decode, writeV1Error)
}

// textRequestAs is textRequest, refusing in render's error shape.
func (s *Server) textRequestAs(w http.ResponseWriter, r *http.Request, decode textDecoder, render errorRenderer) (textRequest, bool) {
	_, span := s.startSpan(r.Context(), "decode request")
	t, ok := s.decodeText(w, r, decode, render)
	endDecode(span, t.jobs, ok, attribute.Bool("genq.stream", t.params.Stream))
	return t, ok
}

// decodeText reads and checks a text request, or refuses it in render's
// error shape.
func (s *Server) decodeText(w http.ResponseWriter, r *http.Request, decode textDecoder, render errorRenderer) (textRequest, bool) {
	start := time.Now()
	body, ok := s.requestBodyOf(w, r, render, cmp.Or(s.cfg.MaxV1BodyBytes, s.cfg.MaxBodyBytes))
	if !ok {
		return textRequest{}, false
	}
	if err := s.requireKind(genq.KindChat, r.URL.Path, "; use POST /v1/images/generations"); err != nil {
		s.rejectAs(w, err, render)
		return textRequest{}, false
	}
	tmpl := genq.Job{Envelope: genq.Envelope{Variant: s.kindQueue(genq.KindChat), Deadline: start.Add(s.cfg.JobTimeout)}}
	params, prompts, err := decode(body, s.promptBytes(), tmpl)
	var model genq.Model
	if err == nil {
		model, err = s.resolveModel(params.Model, genq.KindChat)
	}
	var jobs []genq.Job
	if err == nil {
		onModel(prompts, model)
		keepAlive(prompts, params.KeepAlive)
		jobs, err = s.requestJobs(prompts, params.Choices())
	}
	if err != nil {
		s.rejectAs(w, err, render)
		return textRequest{}, false
	}
	if !jobs[0].PromptOnly { // a count of tokens is free, as Anthropic's is
		err = s.admit(w, r, admission{model: params.Model, resolved: model, cost: tenant.Cost{Tokens: s.reserve(jobs)}, deadline: jobs[0].Deadline})
	}
	if err != nil {
		render(w, s.log, err)
		return textRequest{}, false
	}
	w.Header().Set(HeaderJobID, jobs[0].ID)
	t := textRequest{jobs: jobs, params: params, model: model, start: start, log: s.log.With("job_id", jobs[0].ID, "route", r.URL.Path, "model", model.Name)}
	if ignored := jobs[0].IgnoredTools; len(ignored) > 0 {
		w.Header().Set(HeaderToolsIgnored, strings.Join(ignored, ","))
		t.log.Info("tools left out of the prompt: this server cannot run them", "tools", ignored)
	}
	return t, true
}

// HeaderToolsIgnored names the tools of a request that genq left out of
// its prompt, hosted tools it cannot run (web search, code execution, …),
// comma-separated.
const HeaderToolsIgnored = "Genq-Tools-Ignored"

// HeaderToolArgumentsUnchecked names the tools of an answer's calls whose
// arguments genq could not guarantee, comma-separated: the tool's schema
// was relaxed to be served (genq could not enforce it exactly), and the
// finished arguments fail it or could not be checked against it. The
// calls themselves keep their standard shape. A streamed answer, whose
// headers go before its calls are known, carries it as a trailer.
const HeaderToolArgumentsUnchecked = "Genq-Tool-Arguments-Unchecked"

// markUnchecked says, in HeaderToolArgumentsUnchecked and the log, which
// of the answers' calls genq could not guarantee.
func markUnchecked(w http.ResponseWriter, log *slog.Logger, results ...genq.TextResult) {
	if names := uncheckedTools(log, results...); len(names) > 0 {
		w.Header().Set(HeaderToolArgumentsUnchecked, strings.Join(names, ","))
	}
}

// markUncheckedTrailer is markUnchecked for a streamed answer, whose body
// has begun: the names go in a trailer, which chunked HTTP/1.1 and HTTP/2
// carry after the body without declaring it first.
func markUncheckedTrailer(w http.ResponseWriter, log *slog.Logger, results ...genq.TextResult) {
	if names := uncheckedTools(log, results...); len(names) > 0 {
		w.Header().Set(http.TrailerPrefix+HeaderToolArgumentsUnchecked, strings.Join(names, ","))
	}
}

// uncheckedTools names the tools of the answers' unguaranteed calls,
// logging each call.
func uncheckedTools(log *slog.Logger, results ...genq.TextResult) []string {
	var names []string
	for _, r := range results {
		for _, u := range r.UncheckedToolCalls {
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
			log.Warn("a tool call's arguments are not guaranteed", "tool", u.Name, "call", u.Index, "error", u.Reason)
		}
	}
	return names
}

// requestJobs names and checks the jobs of a request's prompts, n choices
// each, prompt by prompt; it refuses a request larger than the queue,
// which could never be queued whole.
func (s *Server) requestJobs(prompts []genq.Job, n int) ([]genq.Job, error) {
	if err := s.fitsQueue(len(prompts)*n, "answers (prompts × n)"); err != nil {
		return nil, err
	}
	for i := range prompts {
		prompts[i].ID = s.newID()
	}
	if err := s.checkPrompts(prompts); err != nil {
		return nil, err
	}
	jobs := make([]genq.Job, 0, len(prompts)*n)
	for _, p := range prompts {
		jobs = append(jobs, openai.ChoiceJobs(p, n, s.newID)...)
	}
	return jobs, nil
}

// checkPrompts checks a request's prompts as jobs, against the workers'
// limits and for a constraint genq can enforce, naming the prompt of a
// list that fails.
func (s *Server) checkPrompts(prompts []genq.Job) error {
	lims := s.workerLimits()
	if len(prompts) > 0 {
		lims = s.workerLimitsOf(prompts[0].Variant)
	}
	for i, p := range prompts {
		err := p.Validate()
		if err == nil {
			err = lims.Check(p)
		}
		if err == nil {
			err = s.checkConstraint(p)
		}
		if err != nil && len(prompts) > 1 {
			return genq.WrapError(genq.ErrorCode(err), err, fmt.Sprintf("prompt[%d]: %s", i, genq.ErrorMessage(err)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// choice is job i's index among its prompt's choices.
func (t textRequest) choice(i int) int { return i % t.params.Choices() }

// choiceLog is the log of choice i.
func (t textRequest) choiceLog(i int) *slog.Logger {
	if len(t.jobs) > 1 {
		return t.log.With("choice", i)
	}
	return t.log
}

// runTexts runs the jobs of a request's choices at once and returns their
// results in order, or answers the first failure.
func (s *Server) runTexts(ctx context.Context, w http.ResponseWriter, t textRequest) ([]openai.TextResult, bool) {
	results, err := runAll(ctx, t.jobs, func(ctx context.Context, i int, job genq.Job) (openai.TextResult, error) {
		return s.runText(ctx, job, t.choice(i), t.model, t.params.Model, t.start, t.choiceLog(i))
	})
	if err != nil {
		writeV1Error(w, t.log, err)
		return nil, false
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
	return results, true
}

// runText runs one choice's job and reads its text result.
func (s *Server) runText(ctx context.Context, job genq.Job, choice int, m genq.Model, model string, start time.Time, log *slog.Logger) (openai.TextResult, error) {
	res, err := s.runJob(ctx, job, start, log, s.jobs.Run)
	text, err := textOf(res, err)
	if err != nil {
		return openai.TextResult{}, err
	}
	logDone(log, start, res)
	return openai.TextResult{TextResult: text, JobID: job.ID, Created: start.Unix(), Model: s.answerModel(m, res.Worker, model),
		LogprobsAsked: job.Logprobs, EchoAsked: job.Echo, Choice: choice}, nil
}

// stream is what every chunk of a streamed request shares.
func (s *Server) stream(t textRequest) openai.Stream {
	return openai.Stream{JobID: t.jobs[0].ID, Created: t.start.Unix(), Model: s.answerModel(t.model, "", t.params.Model), Logprobs: t.jobs[0].Logprobs}
}

// modelOf names the model a worker serves, from its heartbeat. When that
// worker is unknown (gone, or a stream that has not heard from it yet) it is
// the one model the live workers serve, as GET /v1/models lists it; then
// asked, the request's model.
func (s *Server) modelOf(workerID, asked string) string {
	served := map[string]bool{}
	for _, hb := range s.workers.Live() {
		if hb.WorkerID == workerID {
			return hb.Model
		}
		served[hb.Model] = true
	}
	if len(served) == 1 {
		for m := range served {
			return m
		}
	}
	if asked != "" {
		return asked
	}
	return "genq-" + string(s.cfg.Variant)
}
