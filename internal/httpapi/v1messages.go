package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/genq/genq/internal/anthropic"
	"github.com/genq/genq/internal/genq"
)

// POST /v1/messages and POST /v1/messages/count_tokens: Anthropic's
// Messages API, which its SDKs and Claude Code speak, served stateless: a
// request is one chat job, answered whole or streamed as the API's events,
// with errors in its shape.

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	t, ok := s.textRequestAs(w, r, oneJob(anthropic.Decode), writeAnthropicError)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	answer := anthropic.Answer{JobID: t.jobs[0].ID, Model: s.modelOf("", t.params.Model)}
	if t.params.Stream {
		s.streamMessage(ctx, w, t, answer)
		return
	}
	res, err := s.runText(ctx, t.jobs[0], 0, t.params.Model, t.start, t.log)
	if err != nil {
		writeAnthropicError(w, t.log, err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
	answer.Model = res.Model
	writeJSON(w, http.StatusOK, answer.Render(res.TextResult))
}

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	t, ok := s.textRequestAs(w, r, oneJob(anthropic.DecodeCount), writeAnthropicError)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	res, err := s.runText(ctx, t.jobs[0], 0, t.params.Model, t.start, t.log)
	if err != nil {
		writeAnthropicError(w, t.log, err)
		return
	}
	writeJSON(w, http.StatusOK, anthropic.Count(res.TextResult))
}

// streamMessage runs a message's job and answers with its events: the
// opening ones with the first text, a delta per piece, the closing ones
// with the result. A failure before any event gets its status and error
// body; after, one error event ends the stream, which the SDKs raise.
func (s *Server) streamMessage(ctx context.Context, w http.ResponseWriter, t textRequest, answer anthropic.Answer) {
	if s.streamer == nil {
		writeAnthropicError(w, t.log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	out := sse{w: w, rc: http.NewResponseController(w)}
	events := anthropic.NewEvents(answer, t.jobs[0])
	send := func(events ...anthropic.Event) error {
		for _, e := range events {
			data, err := json.Marshal(e)
			if err == nil {
				err = out.write("event: " + e.Type() + "\ndata: " + string(data) + "\n\n")
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	res, err := s.runJob(ctx, t.jobs[0], t.start, t.log, func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
		return s.streamer.RunStream(ctx, job, func(piece genq.TextPiece) error {
			if piece.Text == "" {
				return nil
			}
			return send(events.Piece(piece.Text)...)
		})
	})
	var text genq.TextResult
	if err == nil {
		defer res.Body.Close()
		_, text, err = readTextResult(res)
	}
	if err != nil {
		if !out.started {
			writeAnthropicError(w, t.log, err)
			return
		}
		_ = send(anthropic.ErrorEvent(err))
		return
	}
	if err := send(events.End(text)...); err != nil {
		t.log.Info("stream client went away at its end", "err", err)
		return
	}
	logDone(t.log, t.start, res, "stream", true)
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
}

// writeAnthropicError answers with err's status in the Messages API's error
// shape.
func writeAnthropicError(w http.ResponseWriter, log *slog.Logger, err error) {
	writeJSON(w, errorStatus(w, log, err), anthropic.Response(err))
}
