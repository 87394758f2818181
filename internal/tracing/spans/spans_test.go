package spans

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
)

// TestEnd holds each way of ending a span to the status and code it leaves:
// a caller's message for genq's errors, never another error's text.
func TestEnd(t *testing.T) {
	secret := errors.New("dial nats://genq:s3cret@host")
	end := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name     string
		finish   func(trace.Span)
		status   codes.Code
		message  string
		code     string
		wantTime bool
	}{
		{"end, no error", func(s trace.Span) { End(s, nil) }, codes.Unset, "", "", false},
		{"end, genq's error", func(s trace.Span) { End(s, genq.Errorf(genq.Invalid, "max_tokens is 0")) }, codes.Error, "max_tokens is 0", "", false},
		{"end, another error", func(s trace.Span) { End(s, secret) }, codes.Error, "internal error", "", false},
		{"end at a time", func(s trace.Span) { End(s, nil, trace.WithTimestamp(end)) }, codes.Unset, "", "", true},
		{"fail coded", func(s trace.Span) { FailCoded(s, genq.Errorf(genq.Invalid, "bad")); s.End() }, codes.Error, "bad", string(genq.Invalid), false},
		{"fail coded, another error", func(s trace.Span) { FailCoded(s, secret); s.End() }, codes.Error, "internal error", string(genq.Internal), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			_, s := tp.Tracer("t").Start(t.Context(), "x")
			tc.finish(s)
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want 1", len(ended))
			}
			got := ended[0]
			if got.Status().Code != tc.status || got.Status().Description != tc.message {
				t.Errorf("status %v %q, want %v %q", got.Status().Code, got.Status().Description, tc.status, tc.message)
			}
			if code := attr(got.Attributes(), "genq.error.code"); code != tc.code {
				t.Errorf("genq.error.code %q, want %q", code, tc.code)
			}
			if tc.wantTime && !got.EndTime().Equal(end) {
				t.Errorf("ended at %s, want %s", got.EndTime(), end)
			}
		})
	}
}

func attr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}
