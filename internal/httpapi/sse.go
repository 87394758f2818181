package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// StreamJobs runs a job to its result, handing over its text as it is
// generated (the pieces join into the result's text), or its image's
// previews as they are made. natsqueue.Client is one.
type StreamJobs interface {
	RunStream(ctx context.Context, job genq.Job, emit func(genq.TextPiece) error) (*genq.ReceivedResult, error)
	// RunImageStream runs an image job, handing over its previews.
	RunImageStream(ctx context.Context, job genq.Job, emit func(genq.ImagePiece) error) (*genq.ReceivedResult, error)
}

// textChunks builds the streamed objects of a text route
// (openai.ChatChunks, openai.CompletionChunks).
type textChunks interface {
	// Piece carries a piece of choice index's text; sofar is the choice's
	// text before it, and first says whether it is the choice's first chunk.
	// Nil is no chunk: the piece is held back until it says something.
	Piece(index int, sofar string, piece genq.TextPiece, first bool) any
	// Finish ends choice index with its finish reason.
	Finish(index int, reason string, first bool) any
	// Usage carries the token counts of every choice.
	Usage(u openai.Usage) any
}

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

// streamText runs the streaming jobs of a request's choices at once and
// answers with their chunks as they come, each choice's last chunk when it
// ends, then the usage chunk when asked for, and [DONE]. A failure after
// the first event ends the stream with one error event in OpenAI's error
// shape and no [DONE], which the SDKs raise as an error: a stream never
// ends short without saying so. The first failure cancels the other
// choices.
func (s *Server) streamText(ctx context.Context, w http.ResponseWriter, t textRequest, chunks textChunks) {
	if s.streamer == nil {
		writeV1Error(w, t.log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := sse{w: w, rc: http.NewResponseController(w)}
	var mu sync.Mutex                    // the stream and what follows: one event at a time
	started := make([]bool, len(t.jobs)) // a choice's first chunk carries the role
	sofar := make([]strings.Builder, len(t.jobs))
	results := make([]openai.TextResult, len(t.jobs))
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
			writeV1Error(w, t.log, err)
			return
		}
		_ = out.event(openai.ErrorResponse{Error: openai.ErrorOf(err)})
	}
	// send writes choice index's chunk and adds text to what it has sent.
	send := func(index int, chunk func(sofar string, first bool) any, text string) error {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || gone != nil {
			return cmp.Or(failed, gone)
		}
		c := chunk(sofar[index].String(), !started[index])
		sofar[index].WriteString(text)
		if c == nil { // nothing to say yet
			return nil
		}
		err := out.event(c)
		started[index] = true
		if err != nil {
			gone = err // the client went away: the request's context ends the jobs
		}
		return err
	}
	var wg sync.WaitGroup
	for i, job := range t.jobs {
		wg.Go(func() {
			log := t.choiceLog(i)
			res, err := s.runJob(ctx, job, t.start, log, func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
				return s.streamer.RunStream(ctx, job, func(piece genq.TextPiece) error {
					return send(i, func(sofar string, first bool) any { return chunks.Piece(i, sofar, piece, first) }, piece.Text)
				})
			})
			text, err := textOf(res, err)
			if err != nil {
				fail(err)
				return
			}
			results[i] = openai.TextResult{TextResult: text, Choice: t.choice(i)}
			finish := func(_ string, first bool) any { return chunks.Finish(i, text.FinishReason, first) }
			if send(i, finish, "") == nil {
				logDone(log, t.start, res, "stream", true)
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return
	}
	err := gone
	if err == nil {
		texts := make([]genq.TextResult, len(results))
		for i, r := range results {
			texts[i] = r.TextResult
		}
		markUncheckedTrailer(w, t.log, texts...)
	}
	if err == nil && t.params.IncludeUsage() {
		err = out.event(chunks.Usage(openai.ChoicesUsage(results)))
	}
	if err == nil {
		err = out.write("data: [DONE]\n\n")
	}
	if err != nil {
		t.log.Info("stream client went away at its end", "err", err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
}

// typedEvents says how one streamed answer becomes typed server-sent
// events, each written "event: <type>" (OpenAI's Responses API,
// Anthropic's Messages API): those of a piece of text (and of reasoning,
// which comes first, when the model gives one), those that close
// the stream, and the one that ends a stream that failed after it began.
// stamp, when set, marks each event with its place in the stream; prompt,
// when set, is told the prompt's token counts when the first piece names
// them, before its events.
type typedEvents[E interface{ Type() string }] struct {
	piece     func(text string) []E
	reasoning func(text string) []E
	end       func(genq.TextResult) []E
	failed    func(error) E
	stamp     func(e E, seq int)
	prompt    func(tokens, cached int)
	render    errorRenderer
}

// streamTyped runs a request's one job and answers with ev's events: the
// opening ones with the first text, a delta per piece, the closing ones
// with the result. A failure before any event gets its status and error
// body in render's shape; after, one error event ends the stream, which
// the SDKs raise.
func streamTyped[E interface{ Type() string }](s *Server, ctx context.Context, w http.ResponseWriter, t textRequest, ev typedEvents[E]) {
	if s.streamer == nil {
		ev.render(w, t.log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	out := sse{w: w, rc: http.NewResponseController(w)}
	seq := 0
	send := func(events ...E) error {
		for _, e := range events {
			if ev.stamp != nil {
				ev.stamp(e, seq)
			}
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
			if ev.prompt != nil && piece.PromptTokens > 0 {
				ev.prompt(piece.PromptTokens, piece.CachedTokens)
			}
			if piece.Reasoning != "" && ev.reasoning != nil {
				if err := send(ev.reasoning(piece.Reasoning)...); err != nil {
					return err
				}
			}
			if piece.Text == "" {
				return nil
			}
			return send(ev.piece(piece.Text)...)
		})
	})
	text, err := textOf(res, err)
	if err != nil {
		if !out.started {
			ev.render(w, t.log, err)
			return
		}
		_ = send(ev.failed(err))
		return
	}
	if err := send(ev.end(text)...); err != nil {
		t.log.Info("stream client went away at its end", "err", err)
		return
	}
	markUncheckedTrailer(w, t.log, text)
	logDone(t.log, t.start, res, "stream", true)
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(t.start).Seconds())
}
