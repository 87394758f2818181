package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/otelcoltest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestOffWithoutEndpoint(t *testing.T) {
	for _, c := range []Config{
		{},
		{Endpoint: "http://127.0.0.1:4318", Disabled: true},
		{TracesEndpoint: "http://127.0.0.1:4318/v1/traces", Disabled: true},
	} {
		tr, err := Setup(t.Context(), c, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Enabled {
			t.Errorf("%+v: tracing on", c)
		}
		_, span := tr.Provider.Tracer("t").Start(t.Context(), "x")
		if span.IsRecording() {
			t.Errorf("%+v: a span records with tracing off", c)
		}
		span.End()
	}
}

func TestTracesURL(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{Config{Endpoint: "https://collector:4318/otlp/"}, "https://collector:4318/otlp/v1/traces"},
		{Config{Endpoint: "http://collector:4317", Protocol: ProtocolGRPC}, "http://collector:4317"},
		{Config{Endpoint: "http://a:1", TracesEndpoint: "http://collector:4318/custom"}, "http://collector:4318/custom"},
	} {
		got, err := tc.c.tracesURL()
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.c, got, err, tc.want)
		}
	}
}

func TestSampler(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true})
	unsampled := sampled.WithTraceFlags(0)
	// TraceID{0xff, …} is above any ratio below 1 (the SDK compares its
	// low 8 bytes), so traceidratio 0.5 drops it.
	high := trace.TraceID{8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
	for _, tc := range []struct {
		sampler, arg string
		parent       trace.SpanContext
		want         bool
	}{
		{"", "", sampled, true},
		{"", "", unsampled, false}, // follows the caller
		{"", "", trace.SpanContext{}, true},
		{"always_on", "", unsampled, true},
		{"always_off", "", sampled, false},
		{"parentbased_always_off", "", trace.SpanContext{}, false},
		{"parentbased_always_off", "", sampled, true},
		{"traceidratio", "0.5", trace.SpanContext{}, false},
		{"traceidratio", "1", trace.SpanContext{}, true},
		{"parentbased_traceidratio", "0", sampled, true},
	} {
		s, err := Config{Sampler: tc.sampler, SamplerArg: tc.arg}.sampler()
		if err != nil {
			t.Fatal(err)
		}
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), tc.parent)
		res := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: high, Name: "x"})
		if got := res.Decision == sdktrace.RecordAndSample; got != tc.want {
			t.Errorf("%s(%s) under %v: sampled %v, want %v", tc.sampler, tc.arg, tc.parent.TraceFlags(), got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	const secret = "s3cr3t-token"
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Endpoint: "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{Config{Endpoint: "http://u:" + secret + "@"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{Config{TracesEndpoint: "ftp://collector"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{Config{Endpoint: "http://c:4318", Protocol: "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{Config{Endpoint: "http://c:4318", Sampler: "jaeger_remote"}, "OTEL_TRACES_SAMPLER"},
		{Config{Endpoint: "http://c:4318", SamplerArg: "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{Config{Endpoint: "http://c:4318", Headers: "authorization=Bearer%ZZ" + secret}, `OTEL_EXPORTER_OTLP_HEADERS: the value of "authorization"`},
		{Config{Endpoint: "http://c:4318", Headers: secret}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{Config{Endpoint: "http://c:4318", ResourceAttributes: "=x"}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		_, err := Setup(t.Context(), tc.c, quiet)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an error naming %s", tc.c, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
}

// TestExportThroughCollector sends a span over each protocol to a real
// collector, under a caller's traceparent, and finds it there whole.
func TestExportThroughCollector(t *testing.T) {
	col := otelcoltest.Start(t)
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"http", Config{Endpoint: col.HTTP, Protocol: ProtocolHTTP}},
		{"http-traces-endpoint", Config{TracesEndpoint: col.HTTP + "/v1/traces"}},
		{"grpc", Config{Endpoint: col.GRPC, Protocol: ProtocolGRPC, Headers: "x-collector-token=abc%20def"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.ServiceName = "svc-" + tc.name
			tc.c.ResourceAttributes = "deployment.environment=test,service.name=ignored"
			tr, err := Setup(t.Context(), tc.c, quiet)
			if err != nil {
				t.Fatal(err)
			}
			traceID := map[string]string{"http": "1bf92f3577b34da6a3ce929d0e0e4736", "http-traces-endpoint": "2bf92f3577b34da6a3ce929d0e0e4736", "grpc": "3bf92f3577b34da6a3ce929d0e0e4736"}[tc.name]
			caller := "00f067aa0ba902b7"
			h := http.Header{"Traceparent": {"00-" + traceID + "-" + caller + "-01"}}
			ctx := Propagator().Extract(t.Context(), propagation.HeaderCarrier(h))
			_, span := tr.Provider.Tracer("t").Start(ctx, "op-"+tc.name)
			span.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			spans, err := col.WaitFor(t.Context(), 10*time.Second, func(s []otelcoltest.Span) bool {
				for _, sp := range s {
					if sp.Name == "op-"+tc.name {
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range spans {
				if sp.Name != "op-"+tc.name {
					continue
				}
				if sp.TraceID != traceID || sp.ParentSpanID != caller || sp.Service != tc.c.ServiceName {
					t.Errorf("span %+v: want trace %s, parent %s, service %s", sp, traceID, caller, tc.c.ServiceName)
				}
			}
		})
	}
}
