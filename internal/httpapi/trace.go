package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tracing"
)

// tracerName names the api's spans.
const tracerName = "github.com/genq/genq/internal/httpapi"

// traceRequests gives every request a server span, a child of the trace
// context its caller sent (traceparent, tracestate) when it sent one. The
// span is named by the route's pattern, never by the path or the query
// (they hold ids and the caller's words), and it records no header: the
// caller's key never enters a span (docs/observability.md).
func (s *Server) traceRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := methodLabel(r.Method)
		ctx, span := s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", method)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, req: r, log: s.log}
		next.ServeHTTP(rec, r.WithContext(ctx))
		endServerSpan(span, r, rec)
	})
}

// endServerSpan names the span by its route and records the answer.
func endServerSpan(span trace.Span, r *http.Request, rec *statusRecorder) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	attrs := []attribute.KeyValue{attribute.Int("http.response.status_code", status)}
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		span.SetName(methodLabel(r.Method) + " " + rc.RoutePattern())
		attrs = append(attrs, attribute.String("http.route", rc.RoutePattern()))
	}
	if id := rec.Header().Get(HeaderRequestID); id != "" {
		attrs = append(attrs, attribute.String("genq.request.id", id))
	}
	if id := rec.Header().Get(HeaderJobID); id != "" {
		attrs = append(attrs, attribute.String("genq.job.id", id))
	}
	span.SetAttributes(attrs...)
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// traceCarrier is the W3C trace context of ctx's span, to keep with what
// outlives the request (a batch); nil when there is none.
func traceCarrier(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	tracing.Propagator().Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// batchLineSpan starts the span under which request i of a batch is
// queued: the root of a trace of its own, so that a batch of thousands
// of requests is not one trace of thousands of runs, linked to the
// request that created the batch.
func (s *Server) batchLineSpan(ctx context.Context, rec batchrun.Record, i int) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("genq.batch.id", rec.Batch.ID), attribute.Int("genq.batch.line", i))}
	if len(rec.Run.Trace) > 0 {
		created := tracing.Propagator().Extract(context.Background(), propagation.MapCarrier(rec.Run.Trace))
		if sc := trace.SpanContextFromContext(created); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return s.tracer.Start(ctx, "queue batch request", opts...)
}

// startSpan starts an internal span of the api's under ctx's.
func (s *Server) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endDecode ends the span of a request's decoding, which made jobs, or
// refused the request (ok false). Only ids and counts go into it: the
// body is the caller's.
func endDecode(span trace.Span, jobs []genq.Job, ok bool, attrs ...attribute.KeyValue) {
	defer span.End()
	if !ok || len(jobs) == 0 {
		span.SetStatus(codes.Error, "request refused")
		return
	}
	span.SetAttributes(append(attrs, attribute.String("genq.job.id", jobs[0].ID), attribute.Int("genq.jobs", len(jobs)))...)
}
