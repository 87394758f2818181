package natsqueue

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tracing/spans"
)

// Trace context in the jobs' headers (docs/protocol.md §2): the W3C
// traceparent and tracestate, as a caller sent them over HTTP, so that a
// worker continues the producer's trace. The names are lower case, as the
// W3C writes them; NATS headers keep case.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// tracer names the queue's spans, whoever's provider makes them.
const tracer = "github.com/genq/genq/internal/natsqueue"

// headerCarrier lets a propagator read and write a message's headers.
type headerCarrier nats.Header

func (h headerCarrier) Get(key string) string { return nats.Header(h).Get(key) }
func (h headerCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }
func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// traceContext is the W3C trace context's propagator: nothing else of a
// caller's (its baggage, say) rides on a job.
func traceContext() propagation.TextMapPropagator { return propagation.TraceContext{} }

// startPublish starts the producer span of job's publish to subject, a
// child of ctx's span and made by its provider (a no-op one when ctx holds
// no span), and writes its context into h, so that the worker's spans
// follow it. Nothing of the job's content goes into the span: its id, its
// variant and class, the subject.
func startPublish(ctx context.Context, job genq.Job, class Class, subject string, h nats.Header) (context.Context, trace.Span) {
	shared := class.Subject(job.Variant)
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracer).Start(ctx, "publish "+shared,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", subject),
			attribute.String("messaging.message.id", job.ID),
			attribute.String("genq.job.id", job.ID),
			attribute.String("genq.variant", string(job.Variant)),
			attribute.String("genq.class", class.String()),
			attribute.Bool("genq.routed", subject != shared),
		))
	traceContext().Inject(ctx, headerCarrier(h))
	return ctx, span
}

// endSpan ends span, marking it failed when err is set. Only the error's
// code and message go into it: genq's messages never hold a key.
func endSpan(span trace.Span, err error) {
	if err != nil {
		spans.FailCoded(span, err)
	}
	span.End()
}

// TraceContext is ctx carrying the trace context d's producer wrote into
// the job's headers, the parent of the worker's spans; ctx as it is when
// the producer wrote none.
func (d *Delivery) TraceContext(ctx context.Context) context.Context {
	h := d.msg.Headers()
	if h == nil {
		return ctx
	}
	return traceContext().Extract(ctx, headerCarrier(h))
}
