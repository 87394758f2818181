package diffusion

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/tracing/spans"
)

// tracerName names the image engines' spans.
const tracerName = "github.com/genq/genq/internal/diffusion"

// StartDenoise starts the span of an image's denoising, one span for all
// of its steps, under ctx's span and by its provider (none when ctx holds
// no span). end closes it, failed when err is set. The prompt stays out:
// it is the caller's.
func StartDenoise(ctx context.Context, p Params) (end func(err error)) {
	_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, "denoise", trace.WithAttributes(
		attribute.Int("genq.steps", p.Steps),
		attribute.Int("genq.width", p.Width),
		attribute.Int("genq.height", p.Height),
		attribute.Float64("genq.guidance", p.Guidance),
		attribute.Bool("genq.negative_prompt", p.Negative != ""),
	))
	return func(err error) { spans.End(span, err) }
}
