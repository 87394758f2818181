package tracing

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkSpan is what one traced step costs a request: its caller's
// context read, a span started and ended, its context written for the
// next hop. Off is the no-op provider of a process without an endpoint;
// on, the SDK's, sampling, with a batcher that exports nowhere.
func BenchmarkSpan(b *testing.B) {
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", Off().Provider},
		{"on", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := tc.tp.Tracer("bench")
			b.ReportAllocs()
			for b.Loop() {
				ctx := Propagator().Extract(context.Background(), propagation.HeaderCarrier(h))
				ctx, span := tr.Start(ctx, "step")
				Propagator().Inject(ctx, propagation.MapCarrier{})
				span.End()
			}
		})
	}
}

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
