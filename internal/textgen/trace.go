package textgen

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/tracing/spans"
)

// tracerName names the text engine's spans.
const tracerName = "github.com/genq/genq/internal/textgen"

// runTimes are when a job's run passed its stages: its call began, its
// request reached the scheduler, took a slot, sampled its first token,
// and ended.
type runTimes struct {
	began, submitted, admitted, first, ended time.Time
}

// traceRun writes a job's spans under ctx's, by the provider of ctx's span
// (none when it holds none): preparing its prompt, prefill (to the first
// token) and decode (the rest), one span each however many tokens, their
// counts as attributes. They are written once the run is over, from the
// times it noted, so the scheduler's loop never waits on a span.
func traceRun(ctx context.Context, t runTimes, out seqResult, err error) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	tr := parent.TracerProvider().Tracer(tracerName)
	_, prep := tr.Start(ctx, "prepare", trace.WithTimestamp(t.began))
	if t.submitted.IsZero() { // refused before the scheduler saw it
		endWith(prep, t.ended, err)
		return
	}
	prep.End(trace.WithTimestamp(t.submitted))
	start := t.submitted
	if !t.admitted.IsZero() {
		start = t.admitted
	}
	_, prefill := tr.Start(ctx, "prefill", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.Int("genq.prompt_tokens", out.PromptTokens),
		attribute.Int("genq.cached_tokens", out.CachedTokens),
		attribute.Int64("genq.slot_wait_ms", start.Sub(t.submitted).Milliseconds())))
	if t.first.IsZero() {
		endWith(prefill, t.ended, err)
		return
	}
	prefill.End(trace.WithTimestamp(t.first))
	_, decode := tr.Start(ctx, "decode", trace.WithTimestamp(t.first), trace.WithAttributes(
		attribute.Int("genq.completion_tokens", out.Tokens),
		attribute.Int("genq.reasoning_tokens", out.ReasonTokens),
		attribute.String("genq.finish_reason", out.FinishReason)))
	endWith(decode, t.ended, err)
}

// endWith ends span at end, failed when err is set.
func endWith(span trace.Span, end time.Time, err error) {
	spans.End(span, err, trace.WithTimestamp(end))
}

// times are req's run's times, once sched.run has returned out or err.
// The loop's own (admitted) are read only when req is done: a run cut off
// by its context may still be in the loop's hands.
func (req *request) times(began time.Time, out seqResult, err error) runTimes {
	t := runTimes{began: began, submitted: req.submitted, ended: time.Now()}
	select {
	case <-req.done:
		t.admitted = req.admitted
	default:
		return t
	}
	if err == nil && out.FirstToken > 0 {
		t.first = req.submitted.Add(out.FirstToken)
	}
	return t
}
