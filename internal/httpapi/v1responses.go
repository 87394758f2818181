package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// POST /v1/responses: OpenAI's Responses API, which its newer SDKs and the
// AI SDK's default provider call, served stateless: a request is one chat
// job, answered whole or streamed as the API's typed events.

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	t, ok := s.textRequest(w, r, oneJob(openai.DecodeResponse))
	if !ok {
		return
	}
	rs := openai.ResponseStream(s.stream(t))
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	if t.params.Stream {
		s.streamResponse(ctx, w, t, rs)
		return
	}
	if results, ok := s.runTexts(ctx, w, t); ok {
		rs.Model = results[0].Model
		writeJSON(w, http.StatusOK, rs.Done(results[0].TextResult))
	}
}

// streamResponse runs a response's job and answers with its events: the
// opening ones with the first text, a delta per piece, the closing ones
// with the result. A failure before any event gets its status and error
// body; after, one error event ends the stream, which the SDKs raise.
func (s *Server) streamResponse(ctx context.Context, w http.ResponseWriter, t textRequest, rs openai.ResponseStream) {
	if s.streamer == nil {
		writeV1Error(w, t.log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	out := sse{w: w, rc: http.NewResponseController(w)}
	events := openai.NewResponseEvents(rs, t.jobs[0])
	seq := 0
	send := func(events ...openai.ResponseEvent) error {
		for _, e := range events {
			e["sequence_number"] = seq
			seq++
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
			writeV1Error(w, t.log, err)
			return
		}
		_ = send(openai.ResponseError(err))
		return
	}
	err = send(events.End(text)...)
	if err != nil {
		t.log.Info("stream client went away at its end", "err", err)
		return
	}
	logDone(t.log, t.start, res, "stream", true)
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
}
