package httpapi

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/genq/genq/internal/anthropic"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's
// Messages API, which its SDKs and Claude Code speak, served stateless: a
// request is one chat job, answered whole or streamed as the API's events,
// with errors in its shape.

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	decode, render := anthropicRequest(oneJob(anthropic.Decode))
	t, ok := s.textRequestAs(w, r, decode, render)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	answer := anthropic.Answer{JobID: t.jobs[0].ID, Model: s.answerModel(t.model, "", t.params.Model)}
	if t.params.Stream {
		s.streamMessage(ctx, w, t, answer)
		return
	}
	res, err := s.runText(ctx, t.jobs[0], 0, t.model, t.params.Model, t.start, t.log)
	if err != nil {
		writeAnthropicError(w, t.log, err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
	answer.Model = res.Model
	markUnchecked(w, t.log, res.TextResult)
	writeJSON(w, http.StatusOK, answer.Render(res.TextResult))
}

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	// A count takes a conversation of any length, the body's limit
	// aside: it is how a client learns that its conversation has
	// outgrown the context, and the worker counts it whatever the context.
	anyLength, render := anthropicRequest(func(body []byte, _ int, job genq.Job) (openai.Params, []genq.Job, error) {
		return oneJob(anthropic.DecodeCount)(body, math.MaxInt, job)
	})
	t, ok := s.textRequestAs(w, r, anyLength, render)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	res, err := s.runText(ctx, t.jobs[0], 0, t.model, t.params.Model, t.start, t.log)
	if err != nil {
		writeAnthropicError(w, t.log, err)
		return
	}
	writeJSON(w, http.StatusOK, anthropic.Count(res.TextResult))
}

// streamMessage answers a message's job with Anthropic's events.
func (s *Server) streamMessage(ctx context.Context, w http.ResponseWriter, t textRequest, answer anthropic.Answer) {
	events := anthropic.NewEvents(answer, t.jobs[0])
	streamTyped(s, ctx, w, t, typedEvents[anthropic.Event]{piece: events.Piece, reasoning: events.Thinking, end: events.End, failed: anthropic.ErrorEvent,
		prompt: events.Prompt, render: writeAnthropicError})
}

// anthropicRequest is a Messages route's decoder, and the renderer of its
// refusals, which names a tool schema's field as Anthropic's API does
// (tools.N.input_schema) from the body decode read.
func anthropicRequest(decode textDecoder) (textDecoder, errorRenderer) {
	var body []byte
	return func(b []byte, maxPrompt int, job genq.Job) (openai.Params, []genq.Job, error) {
			body = b
			return decode(b, maxPrompt, job)
		}, func(w http.ResponseWriter, log *slog.Logger, err error) {
			writeAnthropicError(w, log, anthropic.ToolSchemaError(body, err))
		}
}

// writeAnthropicError answers with err's status in the Messages API's error
// shape.
func writeAnthropicError(w http.ResponseWriter, log *slog.Logger, err error) {
	writeJSON(w, errorStatus(w, log, err), anthropic.Response(err))
}
