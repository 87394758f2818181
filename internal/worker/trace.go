package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tracing/spans"
)

// tracerName names the worker's spans.
const tracerName = "github.com/genq/genq/internal/worker"

// startRun continues the trace d's producer wrote into its headers: a
// span for the job's wait in the queue, from the stream's timestamp to its
// pull (now), and the run's span, which the returned context carries, for
// the backend's spans and the reply's. Each delivery makes its own pair,
// so a redelivery shows in the same trace with its attempt.
func (r *Runtime) startRun(ctx context.Context, d *natsqueue.Delivery) (context.Context, trace.Span) {
	parent := d.TraceContext(ctx)
	pulled := time.Now()
	attrs := []attribute.KeyValue{
		attribute.String("genq.job.id", d.Job.ID),
		attribute.Int("genq.attempt", d.Job.Attempt),
		attribute.String("genq.variant", string(r.cfg.Variant)),
		attribute.String("genq.class", d.Class.String()),
		attribute.String("genq.source", string(d.Source)),
		attribute.String("genq.worker.id", r.cfg.WorkerID),
		attribute.Int64("genq.stream.seq", int64(d.Seq)),
	}
	if !d.Queued.IsZero() {
		_, wait := r.tracer.Start(parent, "queue wait", trace.WithTimestamp(d.Queued), trace.WithAttributes(attrs...))
		wait.SetAttributes(attribute.Int64("genq.queue_wait_ms", pulled.Sub(d.Queued).Milliseconds()))
		wait.End(trace.WithTimestamp(pulled))
	}
	return r.tracer.Start(parent, "run job", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(pulled),
		trace.WithAttributes(append(attrs,
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.message.id", d.Job.ID))...))
}

// failSpan marks ctx's span failed by err's code and its message to the
// caller, which never holds a key.
func failSpan(ctx context.Context, err error) {
	spans.FailCoded(trace.SpanFromContext(ctx), err)
}

// traceOutcome notes on ctx's span how the delivery was settled.
func traceOutcome(ctx context.Context, outcome string, settleErr error) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("genq.outcome", outcome))
	if settleErr != nil {
		span.SetAttributes(attribute.Bool("genq.settle_failed", true))
	}
}
