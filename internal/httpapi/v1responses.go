package httpapi

import (
	"context"
	"net/http"

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
	rs.Echo = openai.EchoOf(t.jobs[0])
	ctx, cancel := context.WithDeadline(r.Context(), t.jobs[0].Deadline)
	defer cancel()
	if t.params.Stream {
		s.streamResponse(ctx, w, t, rs)
		return
	}
	if results, ok := s.runTexts(ctx, w, t); ok {
		rs.Model = results[0].Model
		markUnchecked(w, t.log, results[0].TextResult)
		writeJSON(w, http.StatusOK, rs.Done(results[0].TextResult))
	}
}

// streamResponse answers a response's job with the Responses API's typed
// events, each numbered in its stream.
func (s *Server) streamResponse(ctx context.Context, w http.ResponseWriter, t textRequest, rs openai.ResponseStream) {
	events := openai.NewResponseEvents(rs, t.jobs[0])
	streamTyped(s, ctx, w, t, typedEvents[openai.ResponseEvent]{piece: events.Piece, reasoning: events.Reasoning, end: events.End, failed: openai.ResponseError,
		stamp: func(e openai.ResponseEvent, seq int) { e["sequence_number"] = seq }, render: writeV1Error})
}
