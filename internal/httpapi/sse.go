package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
)

// StreamJobs runs a job to its answer, handing over its text as it is
// generated; the pieces join into the answer's text. natsqueue.Client is
// one. A Jobs without it answers stream: true with a 400.
type StreamJobs interface {
	RunStream(ctx context.Context, job genq.Job, emit func(genq.TextPiece) error) (*genq.ReceivedResult, error)
}

// chunkRenderer builds one streamed object of a route: a piece of choice
// index's text with its tokens' log-probabilities (sofar is the choice's
// text before the piece), or with finish set that choice's last chunk (no
// text), or with usage set the usage chunk (no choice).
type chunkRenderer func(base textAnswer, index int, sofar string, piece genq.TextPiece, finish string, first bool, usage *v1Usage) any

// sse writes server-sent events. Its headers go with the first event, so a
// job that fails before any text (a full queue, a bad prompt) still gets
// its proper status and error body.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (e *sse) event(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write("data: " + string(data) + "\n\n")
}

func (e *sse) write(s string) error {
	if !e.started {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // proxies must not hold events back
		e.w.WriteHeader(http.StatusOK)
		e.started = true
	}
	if _, err := io.WriteString(e.w, s); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return e.rc.Flush()
}

// streamV1 runs the streaming jobs of a request's choices at once and
// answers with their chunks as they come, each choice's last chunk when it
// ends, then the usage chunk when asked for, and [DONE]. A failure after
// the first event ends the stream with one error event in OpenAI's error
// shape and no [DONE], which the SDKs raise as an error: a stream never
// ends short without saying so. The first failure cancels the other
// choices.
func (s *Server) streamV1(ctx context.Context, w http.ResponseWriter, jobs []genq.Job, params v1Params,
	start time.Time, log *slog.Logger, chunk chunkRenderer) {
	streamer, ok := s.jobs.(StreamJobs)
	if !ok {
		writeV1Error(w, log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := sse{w: w, rc: http.NewResponseController(w)}
	// Every chunk of the stream, whatever its choice, carries the first
	// job's id, as OpenAI's chunks share one id.
	base := textAnswer{jobID: jobs[0].ID, created: start.Unix(), model: s.modelOf("", params.Model), logprobs: jobs[0].Logprobs}
	var mu sync.Mutex                  // the stream and what follows: one event at a time
	started := make([]bool, len(jobs)) // a choice's first chunk carries the role
	sofar := make([]strings.Builder, len(jobs))
	answers := make([]textAnswer, len(jobs))
	var failed, gone error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || gone != nil {
			return
		}
		failed = err
		cancel()
		if !out.started {
			writeV1Error(w, log, err)
			return
		}
		code := genq.ErrorCode(err)
		_ = out.event(v1ErrorResponse{Error: v1Error{Message: genq.ErrorMessage(err), Type: v1ErrorType(code), Code: string(code)}})
	}
	send := func(index int, piece genq.TextPiece, finish string) error {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || gone != nil {
			return cmp.Or(failed, gone)
		}
		err := out.event(chunk(base, index, sofar[index].String(), piece, finish, !started[index], nil))
		started[index] = true
		sofar[index].WriteString(piece.Text)
		if err != nil {
			gone = err // the client went away: the request's context ends the jobs
		}
		return err
	}
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() {
			log := log
			if len(jobs) > 1 {
				log = log.With("choice", i)
			}
			var runErr error
			answer := s.runJobWith(ctx, nil, job, start, log, func(_ http.ResponseWriter, _ *slog.Logger, err error) { runErr = err },
				func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
					return streamer.RunStream(ctx, job, func(piece genq.TextPiece) error { return send(i, piece, "") })
				})
			if answer == nil {
				fail(runErr)
				return
			}
			defer answer.Body.Close()
			a := base
			if err := json.NewDecoder(io.LimitReader(answer.Body, maxTextResult)).Decode(&a.TextResult); err != nil {
				fail(fmt.Errorf("read the text result: %w", err))
				return
			}
			answers[i] = a
			if send(i, genq.TextPiece{}, a.FinishReason) == nil {
				log.Info("generate done", "stream", true, "ms", time.Since(start).Milliseconds(), "queue_wait_ms", answer.QueueWait.Milliseconds(),
					"run_ms", answer.RunTime.Milliseconds(), "attempt", answer.Attempt, "worker", answer.Worker)
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return
	}
	err := gone
	if err == nil && params.includeUsage() {
		u := choicesUsage(answers)
		err = out.event(chunk(base, 0, "", genq.TextPiece{}, "", false, &u))
	}
	if err == nil {
		err = out.write("data: [DONE]\n\n")
	}
	if err != nil {
		log.Info("stream client went away at its end", "err", err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
}

type chatCompletionChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *v1Usage          `json:"usage,omitempty"`
}

// chatChunkChoice is a chat choice in a stream. Log-probabilities, when
// asked for, come with the text of their tokens.
type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

func chatChunk(base textAnswer, index int, _ string, piece genq.TextPiece, finish string, first bool, usage *v1Usage) any {
	c := chatCompletionChunk{ID: "chatcmpl-" + base.jobID, Object: "chat.completion.chunk", Created: base.created,
		Model: base.model, Choices: []chatChunkChoice{}, Usage: usage}
	if usage == nil {
		choice := chatChunkChoice{Index: index, Delta: chatDelta{Content: piece.Text}}
		if base.logprobs && finish == "" {
			choice.Logprobs = chatLogprobsOf(orEmpty(piece.Logprobs))
		}
		if first {
			choice.Delta.Role = genq.RoleAssistant
		}
		if finish != "" {
			choice.FinishReason = &finish
		}
		c.Choices = append(c.Choices, choice)
	}
	return c
}

type completionChunkObject struct {
	ID      string                  `json:"id"`
	Object  string                  `json:"object"`
	Created int64                   `json:"created"`
	Model   string                  `json:"model"`
	Choices []completionChunkChoice `json:"choices"`
	Usage   *v1Usage                `json:"usage,omitempty"`
}

// completionChunkChoice is a completion's choice in a stream: the finish
// reason is null until the last chunk, as OpenAI sends it, and the
// log-probabilities come with the text of their tokens, as with chats.
type completionChunkChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

func completionChunk(base textAnswer, index int, sofar string, piece genq.TextPiece, finish string, _ bool, usage *v1Usage) any {
	c := completionChunkObject{ID: "cmpl-" + base.jobID, Object: "text_completion", Created: base.created,
		Model: base.model, Choices: []completionChunkChoice{}, Usage: usage}
	if usage == nil {
		choice := completionChunkChoice{Index: index, Text: piece.Text}
		if base.logprobs && finish == "" {
			// Offsets count characters from the start of the answer.
			choice.Logprobs = completionLogprobsOf(sofar+piece.Text, nil, orEmpty(piece.Logprobs), "")
		}
		if finish != "" {
			choice.FinishReason = &finish
		}
		c.Choices = append(c.Choices, choice)
	}
	return c
}
