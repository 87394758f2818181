package diffusion

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/genq/genq/internal/genq"
)

func TestStartDenoise(t *testing.T) {
	p := Params{Width: 512, Height: 256, Steps: 4, Guidance: 1.5, Negative: "blurry"}
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"ok", nil, codes.Unset},
		{"failed", genq.WrapError(genq.Internal, errors.New("boom"), "the denoiser failed"), codes.Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, run := tp.Tracer("t").Start(context.Background(), "run job")
			StartDenoise(ctx, p)(tc.err)
			run.End()
			ended := rec.Ended()
			if len(ended) != 2 || ended[0].Name() != "denoise" {
				t.Fatalf("spans %v", ended)
			}
			d := ended[0]
			if d.Parent().SpanID() != run.SpanContext().SpanID() || d.Status().Code != tc.want {
				t.Errorf("parent %s, status %v; want %s, %v", d.Parent().SpanID(), d.Status(), run.SpanContext().SpanID(), tc.want)
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, a := range d.Attributes() {
				attrs[a.Key] = a.Value
			}
			if attrs["genq.steps"].AsInt64() != 4 || attrs["genq.width"].AsInt64() != 512 || attrs["genq.height"].AsInt64() != 256 ||
				!attrs["genq.negative_prompt"].AsBool() {
				t.Errorf("attributes %v", d.Attributes())
			}
			for _, a := range d.Attributes() {
				if a.Value.String() == p.Negative {
					t.Errorf("the prompt is in attribute %s", a.Key)
				}
			}
		})
	}
}
