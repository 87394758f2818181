package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/go-chi/chi/v5"
)

// The OpenAI-compatible routes: the request and response shapes of
// OpenAI's chat completions, completions and models, so that its SDKs and
// the tools built on them work against genq unchanged. Only what genq can
// honour is accepted. The rest of OpenAI's fields are ignored, except those
// whose silent loss would hand back another kind of answer than the one
// asked for: tool calls, JSON output, best_of and suffix are refused with
// a 400 that says so, as are echo in a chat and echo with streaming.

// v1Params are the generation fields both request kinds share.
type v1Params struct {
	Model               string        `json:"model"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Temperature         *float64      `json:"temperature"`
	TopP                *float64      `json:"top_p"`
	Seed                *int64        `json:"seed"`
	Stop                genq.StopList `json:"stop"`
	N                   *int          `json:"n"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	TopK              *int        `json:"top_k"` // vLLM's and llama.cpp's extensions
	MinP              *float64    `json:"min_p"`
	RepetitionPenalty *float64    `json:"repetition_penalty"`
	IgnoreEOS         bool        `json:"ignore_eos"`
	FrequencyPenalty  *float64    `json:"frequency_penalty"`
	PresencePenalty   *float64    `json:"presence_penalty"`
	LogitBias         tokenBiases `json:"logit_bias"`

	// Features genq does not have, read only to refuse them when asked for.
	Tools          []any           `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	Functions      []any           `json:"functions"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Echo   bool   `json:"echo"` // completions only: a chat refuses it
	BestOf *int   `json:"best_of"`
	Suffix string `json:"suffix"`
}

// tokenBiases is logit_bias: token ids, as strings, to numbers.
type tokenBiases map[int32]float64

func (b *tokenBiases) UnmarshalJSON(data []byte) error {
	var raw map[string]float64
	if err := json.Unmarshal(data, &raw); err != nil {
		return genq.Errorf(genq.Invalid, `logit_bias must map token ids to numbers, as {"1234": -100}`)
	}
	*b = make(tokenBiases, len(raw))
	for key, bias := range raw {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil {
			return genq.Errorf(genq.Invalid, "logit_bias names %q: keys are token ids, as \"1234\"", key)
		}
		(*b)[int32(id)] = bias
	}
	return nil
}

// unsupported names the first feature p asks for that genq does not have,
// as the refusal's message; "" when there is none.
func (p v1Params) unsupported() string {
	switch {
	case len(p.Tools) > 0 && string(p.ToolChoice) != `"none"`, len(p.Functions) > 0:
		return "tools are not supported: this server's models answer in text and call no tools; leave tools out, or send tool_choice: none"
	case p.ResponseFormat != nil && p.ResponseFormat.Type != "" && p.ResponseFormat.Type != "text":
		return fmt.Sprintf("response_format %q is not supported: this server does not constrain answers to JSON; ask for JSON in the prompt and leave response_format out", p.ResponseFormat.Type)
	case p.Echo && p.Stream:
		return "echo with stream: true is not supported: ask for the echo without streaming"
	case p.BestOf != nil && *p.BestOf > 1:
		return fmt.Sprintf("best_of is %d: this server generates one answer per request; send best_of: 1 or leave it out", *p.BestOf)
	case p.Suffix != "":
		return "suffix is not supported: this server completes a prompt forwards only; leave suffix out"
	}
	return ""
}

// MaxChoices bounds n, the choices one request asks for: each is a job of
// its own, run at once beside the others.
const MaxChoices = 8

// choices is how many answers the request asks for.
func (p v1Params) choices() int {
	if p.N == nil {
		return 1
	}
	return *p.N
}

// choiceJobs are the jobs of a request for n choices: job, and n-1 more
// like it under ids of their own. Each draws from a seed of its own, the
// request's plus its index when it gives one (n answers of one seed would
// be n copies), a random one otherwise (a worker's fixed TEXT_SEED would
// make copies too).
func (s *Server) choiceJobs(job genq.Job, n int) []genq.Job {
	jobs := make([]genq.Job, n)
	for i := range jobs {
		j := job
		if i > 0 {
			j.ID = s.newID()
		}
		seed := rand.Int64()
		if job.Seed != nil {
			seed = *job.Seed + int64(i)
		}
		j.Seed = &seed
		jobs[i] = j
	}
	return jobs
}

// includeUsage reports whether a stream ends with a chunk of token counts.
func (p v1Params) includeUsage() bool { return p.StreamOptions != nil && p.StreamOptions.IncludeUsage }

type chatRequest struct {
	v1Params
	Messages    []chatMessageIn `json:"messages"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs int             `json:"top_logprobs"`
}

type chatMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	v1Params
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs is the legacy API's: how many of the most likely tokens to
	// list at each position, the sampled one's log-probability besides.
	Logprobs *int `json:"logprobs"`
}

// job fills the job's generation parameters from p, refusing what genq
// cannot do.
func (p v1Params) job(j *genq.Job) error {
	switch {
	case p.N != nil && (*p.N < 1 || *p.N > MaxChoices):
		return genq.Errorf(genq.Invalid, "n must be between 1 and %d, not %d", MaxChoices, *p.N)
	case p.MaxTokens != nil && *p.MaxTokens < 1:
		return genq.Errorf(genq.Invalid, "max_tokens must be at least 1, not %d", *p.MaxTokens)
	case p.MaxCompletionTokens != nil && *p.MaxCompletionTokens < 1:
		return genq.Errorf(genq.Invalid, "max_completion_tokens must be at least 1, not %d", *p.MaxCompletionTokens)
	}
	if msg := p.unsupported(); msg != "" {
		return genq.Errorf(genq.Invalid, "%s", msg)
	}
	if p.MaxTokens != nil {
		j.MaxTokens = *p.MaxTokens
	}
	if p.MaxCompletionTokens != nil {
		j.MaxCompletionTokens = *p.MaxCompletionTokens
	}
	j.Temperature, j.TopP, j.Seed, j.Stop, j.Stream = p.Temperature, p.TopP, p.Seed, p.Stop, p.Stream
	j.TopK, j.MinP, j.RepetitionPenalty, j.IgnoreEOS, j.Echo = p.TopK, p.MinP, p.RepetitionPenalty, p.IgnoreEOS, p.Echo
	j.FrequencyPenalty, j.PresencePenalty, j.LogitBias = p.FrequencyPenalty, p.PresencePenalty, p.LogitBias
	return nil
}

// decodeV1 reads a /v1 request body: one JSON object, valid UTF-8, fields of
// the right types.
func decodeV1(body []byte, v any) error {
	if !utf8.Valid(body) {
		return genq.Errorf(genq.Invalid, "request body is not valid UTF-8")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if len(t) == 0 {
			return genq.Errorf(genq.Invalid, "request body is not valid JSON: unexpected end of input")
		}
		return genq.Errorf(genq.Invalid, "request body must be a JSON object")
	}
	err := json.Unmarshal(body, v)
	var typeErr *json.UnmarshalTypeError
	var appErr *genq.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &appErr):
		return appErr
	case errors.As(err, &typeErr):
		return genq.Errorf(genq.Invalid, "%s must be %s, not %s", jsonField(typeErr.Field), jsonTypeName(typeErr.Type.String()), typeErr.Value)
	}
	return malformed(err)
}

// jsonField is a decoding error's path to a field as the client wrote it:
// encoding/json names the embedded struct the field came through
// ("v1Params.temperature"), which the client never saw.
func jsonField(path string) string {
	return strings.ReplaceAll(path, "v1Params.", "")
}

func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "an object"
}

// messages turns a chat's messages into the job's. Content is a string, or
// a list of text parts, as OpenAI's API allows; "developer" is the newer
// name of "system".
func (s *Server) messages(in []chatMessageIn) ([]genq.Message, error) {
	if len(in) == 0 {
		return nil, genq.Errorf(genq.Invalid, "messages is required: a list of {role, content}")
	}
	out := make([]genq.Message, len(in))
	size := 0
	for i, m := range in {
		role := m.Role
		if role == "developer" {
			role = genq.RoleSystem
		}
		content, err := contentText(m.Content)
		if err != nil {
			return nil, genq.Errorf(genq.Invalid, "messages[%d].content %s", i, err.Error())
		}
		size += len(content)
		out[i] = genq.Message{Role: role, Content: content}
	}
	if size > s.cfg.MaxPromptBytes {
		return nil, genq.Errorf(genq.Invalid, "messages hold %d bytes of content; the limit is %d", size, s.cfg.MaxPromptBytes)
	}
	return out, genq.ValidateMessages(out)
}

func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var text string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", errors.New("is not a valid string")
		}
		return text, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or a list of text parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("has a part of type %q: only text parts are supported", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// completionPrompt is a completion's prompt: a string, a list of one
// string, a list of token ids, or a list of one such list, as OpenAI's
// API takes them. Token ids go to the model as they are.
func (s *Server) completionPrompt(raw json.RawMessage, job *genq.Job) error {
	var text string
	var texts []string
	var ids []int32
	var idLists [][]int32
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return malformed(err)
		}
	case json.Unmarshal(raw, &texts) == nil:
		if len(texts) > 1 {
			return genq.Errorf(genq.Invalid, "prompt holds %d prompts: this server answers one per request", len(texts))
		}
		if len(texts) == 1 {
			text = texts[0]
		}
	case json.Unmarshal(raw, &ids) == nil:
		job.PromptTokenIDs = ids
	case json.Unmarshal(raw, &idLists) == nil:
		if len(idLists) > 1 {
			return genq.Errorf(genq.Invalid, "prompt holds %d prompts: this server answers one per request", len(idLists))
		}
		if len(idLists) == 1 {
			job.PromptTokenIDs = idLists[0]
		}
	default:
		return genq.Errorf(genq.Invalid, "prompt must be a string, or a list of token ids (integers from 0)")
	}
	switch {
	case len(job.PromptTokenIDs) > 0:
		return nil
	case text == "":
		return genq.Errorf(genq.Invalid, "prompt is required")
	case len(text) > s.cfg.MaxPromptBytes:
		return genq.Errorf(genq.Invalid, "prompt is %d bytes long; the limit is %d", len(text), s.cfg.MaxPromptBytes)
	}
	job.Prompt = text
	return nil
}

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	s.handleV1(w, r, s.chatJob, chatChunk, renderChat)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.handleV1(w, r, s.completionJob, completionChunk, renderCompletion)
}

// textAnswer is a detailed text result with what an OpenAI object adds.
type textAnswer struct {
	genq.TextResult
	jobID    string
	created  int64
	model    string
	logprobs bool // the job asked for them
	echo     bool // the job asked for its prompt back
}

// logprobEntries are the answer's log-probabilities: nil when the job did
// not ask for them, and a list, empty for an empty answer, when it did
// (the worker's result leaves an empty list out).
func (a textAnswer) logprobEntries() []genq.TokenLogprob {
	if a.logprobs {
		return orEmpty(a.Logprobs)
	}
	return a.Logprobs
}

func (a textAnswer) usage() v1Usage {
	var u v1Usage
	if a.Usage != nil {
		u = v1Usage{PromptTokens: a.Usage.PromptTokens, CompletionTokens: a.Usage.CompletionTokens}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// maxTextResult bounds the text result the api reads into memory; text
// answers are a few KiB.
const maxTextResult = 16 << 20

// handleV1 is the flow both generation routes share: read the body, let
// decode fill the job, run it, and answer with render's object. Errors take
// OpenAI's shape.
func (s *Server) handleV1(w http.ResponseWriter, r *http.Request,
	decode func(body []byte, job *genq.Job) (v1Params, error), chunk chunkRenderer, render func(...textAnswer) any) {
	start := time.Now()
	body, ok := s.requestBody(w, r, writeV1Error)
	if !ok {
		return
	}
	if s.cfg.Variant.Kind() != genq.OutputText {
		s.rejectAs(w, genq.Errorf(genq.Invalid, "variant %s makes images: %s needs a text variant (A or B); use POST /generate",
			s.cfg.Variant, r.URL.Path), writeV1Error)
		return
	}
	job := genq.Job{ID: s.newID(), Variant: s.cfg.Variant, Deadline: start.Add(s.cfg.JobTimeout)}
	params, err := decode(body, &job)
	model := params.Model
	if err == nil {
		err = job.Validate()
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	log := s.log.With("job_id", job.ID, "route", r.URL.Path)
	w.Header().Set(HeaderJobID, job.ID)

	// As for /generate: the deadline counts queueing, and a client that goes
	// away cancels the job.
	ctx, cancel := context.WithDeadline(r.Context(), job.Deadline)
	defer cancel()
	jobs := []genq.Job{job}
	if n := params.choices(); n > 1 {
		jobs = s.choiceJobs(job, n)
	}
	if job.Stream {
		s.streamV1(ctx, w, jobs, params, start, log, chunk)
		return
	}
	answers, err := s.runTexts(ctx, jobs, model, start, log)
	if err != nil {
		writeV1Error(w, log, err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, render(answers...))
}

// runTexts runs the jobs of one request's choices at once and returns
// their answers in order.
func (s *Server) runTexts(ctx context.Context, jobs []genq.Job, model string, start time.Time, log *slog.Logger) ([]textAnswer, error) {
	return runAll(ctx, jobs, func(ctx context.Context, i int, job genq.Job) (textAnswer, error) {
		choiceLog := log
		if len(jobs) > 1 {
			choiceLog = log.With("choice", i)
		}
		return s.runText(ctx, job, model, start, choiceLog)
	})
}

// runText runs one job and reads its detailed text result.
func (s *Server) runText(ctx context.Context, job genq.Job, model string, start time.Time, log *slog.Logger) (textAnswer, error) {
	var failed error
	answer := s.runJobWith(ctx, nil, job, start, log, func(_ http.ResponseWriter, _ *slog.Logger, err error) { failed = err }, s.jobs.Run)
	if answer == nil {
		return textAnswer{}, failed
	}
	defer answer.Body.Close()
	data, err := io.ReadAll(io.LimitReader(answer.Body, maxTextResult))
	out := textAnswer{jobID: job.ID, created: start.Unix(), model: s.modelOf(answer.Worker, model), logprobs: job.Logprobs, echo: job.Echo}
	if err == nil {
		err = json.Unmarshal(data, &out.TextResult)
	}
	if err != nil {
		return textAnswer{}, fmt.Errorf("read the text result: %w", err)
	}
	log.Info("generate done", "ms", time.Since(start).Milliseconds(), "queue_wait_ms", answer.QueueWait.Milliseconds(),
		"run_ms", answer.RunTime.Milliseconds(), "attempt", answer.Attempt, "worker", answer.Worker)
	return out, nil
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

type v1Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   v1Usage      `json:"usage"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

// chatLogprobs are a chat choice's log-probabilities: an entry per token of
// the content. genq never refuses in the model's voice, so refusal stays
// null.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal []chatLogprob `json:"refusal"`
}

type chatLogprob struct {
	genq.Logprob
	TopLogprobs []genq.Logprob `json:"top_logprobs"`
}

// orEmpty is entries, or an empty list for none: a job that asked for
// log-probabilities gets a list, maybe empty, never null.
func orEmpty(entries []genq.TokenLogprob) []genq.TokenLogprob {
	if entries == nil {
		return []genq.TokenLogprob{}
	}
	return entries
}

// chatLogprobsOf renders a result's entries; nil (null) when the job did
// not ask for them.
func chatLogprobsOf(entries []genq.TokenLogprob) *chatLogprobs {
	if entries == nil {
		return nil
	}
	out := &chatLogprobs{Content: make([]chatLogprob, len(entries))}
	for i, e := range entries {
		out.Content[i] = chatLogprob{Logprob: e.Logprob, TopLogprobs: e.Top}
		if e.Top == nil {
			out.Content[i].TopLogprobs = []genq.Logprob{} // OpenAI's list is never null
		}
	}
	return out
}

// completionLogprobs are the legacy completions' log-probabilities: a
// column per token. Each top_logprobs entry holds the sampled token too,
// as vLLM's do; text_offset counts characters of the text. With echo the
// prompt's tokens come first, the first of them with null for its
// log-probability and its alternatives: nothing comes before it.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// completionLogprobsOf renders the entries of text, and before them those
// of an echoed prompt whose text starts text (prompt nil: no echo).
func completionLogprobsOf(text string, prompt, entries []genq.TokenLogprob, promptText string) *completionLogprobs {
	if entries == nil {
		return nil
	}
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	add := func(e genq.TokenLogprob, offset int, scored bool) {
		out.Tokens = append(out.Tokens, e.Token)
		out.TextOffset = append(out.TextOffset, charOffset(text, offset))
		if !scored {
			out.TokenLogprobs = append(out.TokenLogprobs, nil)
			out.TopLogprobs = append(out.TopLogprobs, nil)
			return
		}
		logprob := e.Logprob.Logprob
		out.TokenLogprobs = append(out.TokenLogprobs, &logprob)
		// Different tokens may read the same (bytes that are not UTF-8
		// all read U+FFFD): the sampled one's entry wins.
		top := map[string]float64{}
		for _, t := range e.Top {
			top[t.Token] = t.Logprob
		}
		top[e.Token] = logprob
		out.TopLogprobs = append(out.TopLogprobs, top)
	}
	for i, e := range prompt {
		add(e, e.Offset, i > 0)
	}
	for _, e := range entries {
		add(e, len(promptText)+e.Offset, true)
	}
	return out
}

// charOffset is the number of characters of text before its byte offset,
// a character's start; past the end, all of them.
func charOffset(text string, offset int) int {
	return utf8.RuneCountInString(text[:min(offset, len(text))])
}

type chatMessageOut struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   v1Usage            `json:"usage"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
}

type modelList struct {
	Object string    `json:"object"`
	Data   []v1Model `json:"data"`
}

type v1Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// handleModels lists the models the live workers serve, as their heartbeats
// name them (the GGUF file or the export's directory), each created when
// its first live worker started. With no worker live the list is empty:
// which model a worker would load is the worker's to say.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: s.liveModels()})
}

// handleModel is one model of the list, or a 404 in OpenAI's words. The id
// is the rest of the path: a model's name may hold slashes.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	for _, m := range s.liveModels() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeV1Error(w, s.log, genq.Errorf(genq.NotFound, "the model %q does not exist: GET /v1/models lists the models served", id))
}

// liveModels are the models the live workers serve, sorted by id.
func (s *Server) liveModels() []v1Model {
	byID := map[string]int64{}
	for _, hb := range s.workers.Live() {
		if c, ok := byID[hb.Model]; !ok || hb.StartedAt.Unix() < c {
			byID[hb.Model] = hb.StartedAt.Unix()
		}
	}
	models := []v1Model{}
	for id, created := range byID {
		models = append(models, v1Model{ID: id, Object: "model", Created: created, OwnedBy: "genq"})
	}
	slices.SortFunc(models, func(a, b v1Model) int { return strings.Compare(a.ID, b.ID) })
	return models
}
