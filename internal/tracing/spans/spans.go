// Package spans holds genq's one rule for a failed span: its status is the
// error's message to the caller (genq's messages never hold a key), and,
// where a span stands for a job's step, the error's code. It lives apart
// from package tracing so that code marking spans does not pull in the
// OTLP exporters.
package spans

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
)

// Fail marks s failed by err's message.
func Fail(s trace.Span, err error) {
	s.SetStatus(codes.Error, genq.ErrorMessage(err))
}

// FailCoded marks s failed by err's message and names err's code, so a
// trace can be searched by code.
func FailCoded(s trace.Span, err error) {
	Fail(s, err)
	s.SetAttributes(attribute.String("genq.error.code", string(genq.ErrorCode(err))))
}

// End ends s, failed by err when err is set.
func End(s trace.Span, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		Fail(s, err)
	}
	s.End(opts...)
}
