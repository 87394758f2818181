package textgen

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTraceRun holds a run's spans to the times it noted: prepare up to
// the submission, prefill from the slot to the first token, decode from
// there to the end, each a child of the run's span with its counts.
func TestTraceRun(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	out := seqResult{PromptTokens: 53, CachedTokens: 16, Tokens: 4, FinishReason: "length"}
	type span struct {
		name       string
		start, end time.Time
		failed     bool
	}
	for _, tc := range []struct {
		name  string
		times runTimes
		err   error
		want  []span
	}{
		{"answered", runTimes{began: at(0), submitted: at(2), admitted: at(5), first: at(9), ended: at(20)}, nil,
			[]span{{"prepare", at(0), at(2), false}, {"prefill", at(5), at(9), false}, {"decode", at(9), at(20), false}}},
		{"cut off before its first token", runTimes{began: at(0), submitted: at(2), admitted: at(5), ended: at(7)}, errors.New("context canceled"),
			[]span{{"prepare", at(0), at(2), false}, {"prefill", at(5), at(7), true}}},
		{"refused while prepared", runTimes{began: at(0), ended: at(1)}, errors.New("too long"),
			[]span{{"prepare", at(0), at(1), true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, run := tp.Tracer("t").Start(context.Background(), "run job")
			traceRun(ctx, tc.times, out, tc.err)
			got := rec.Ended()
			if len(got) != len(tc.want) {
				t.Fatalf("%d spans, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name() != w.name || !g.StartTime().Equal(w.start) || !g.EndTime().Equal(w.end) ||
					(g.Status().Code == codes.Error) != w.failed || g.Parent().SpanID() != run.SpanContext().SpanID() {
					t.Errorf("span %d: %s %s–%s status %v; want %+v", i, g.Name(), g.StartTime(), g.EndTime(), g.Status(), w)
				}
			}
			if tc.name == "answered" {
				checkAttr(t, got[1], "genq.prompt_tokens", 53)
				checkAttr(t, got[1], "genq.cached_tokens", 16)
				checkAttr(t, got[1], "genq.slot_wait_ms", 3)
				checkAttr(t, got[2], "genq.completion_tokens", 4)
			}
		})
	}
}

func checkAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string, want int64) {
	t.Helper()
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(key) {
			if a.Value.AsInt64() != want {
				t.Errorf("%s %s = %d, want %d", s.Name(), key, a.Value.AsInt64(), want)
			}
			return
		}
	}
	t.Errorf("%s has no %s", s.Name(), key)
}
