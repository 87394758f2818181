// Package tracing sets up OpenTelemetry traces for a genq process: an OTLP
// exporter when an endpoint is configured, a no-op provider otherwise, and
// the W3C trace context that carries a trace from the caller through the
// api and the queue into the worker (docs/observability.md).
//
// Nothing here is global: each process builds its provider once and hands
// it to the api's server or the worker's runtime. Code below them (the
// queue's publish, the backends) takes the provider from the span in its
// context, so it needs no setting of its own and costs nothing untraced.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The OTLP protocols OTEL_EXPORTER_OTLP_PROTOCOL names.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Tracing is a process's tracer provider and what ends it.
type Tracing struct {
	Provider trace.TracerProvider
	// Shutdown sends the spans still buffered and stops the exporter; a
	// no-op when tracing is off.
	Shutdown func(context.Context) error
	// Enabled says spans are exported.
	Enabled bool
}

// Off is the no-op tracing of a process without an endpoint: spans cost a
// context lookup and nothing is sent.
func Off() Tracing {
	return Tracing{Provider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}
}

// Propagator reads and writes the W3C trace context (traceparent and
// tracestate), in HTTP headers and in the jobs' NATS headers alike. Baggage
// is left out: it is the caller's free-form data, and nothing in genq reads
// it.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Setup builds the process's tracing from c. With no endpoint, or with
// OTEL_SDK_DISABLED, it is Off.
func Setup(ctx context.Context, c Config, log *slog.Logger) (Tracing, error) {
	if c.Disabled || c.endpoint() == "" {
		return Off(), nil
	}
	sampler, err := c.sampler()
	if err != nil {
		return Tracing{}, err
	}
	exp, err := c.exporter(ctx)
	if err != nil {
		return Tracing{}, err
	}
	attrs, err := c.resourceAttributes()
	if err != nil {
		return Tracing{}, err
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil {
		return Tracing{}, fmt.Errorf("tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
	log.Info("tracing on", "endpoint", redactURL(c.endpoint()), "protocol", c.protocol(), "service", c.ServiceName, "sampler", c.Sampler)
	return Tracing{Provider: tp, Shutdown: tp.Shutdown, Enabled: true}, nil
}

// exporter is the OTLP exporter c names.
func (c Config) exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	u, err := c.tracesURL()
	if err != nil {
		return nil, err
	}
	headers, err := parseHeaders(c.Headers)
	if err != nil {
		return nil, err
	}
	switch c.protocol() {
	case ProtocolHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u)}
		if len(headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(u)}
		if len(headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: genq exports traces over %s or %s", c.Protocol, ProtocolHTTP, ProtocolGRPC)
}

func (c Config) protocol() string {
	if c.Protocol == "" {
		return ProtocolHTTP
	}
	return c.Protocol
}

func (c Config) endpoint() string {
	if c.TracesEndpoint != "" {
		return c.TracesEndpoint
	}
	return c.Endpoint
}

// tracesURL is where spans go. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is taken
// as it is; OTEL_EXPORTER_OTLP_ENDPOINT is a base, to which OTLP over HTTP
// adds the signal's path, as the specification says.
func (c Config) tracesURL() (string, error) {
	raw, name := c.TracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if raw == "" {
		raw, name = c.Endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%s %q: want a URL such as http://collector:4318", name, redactURL(raw))
	}
	if c.TracesEndpoint == "" && c.protocol() == ProtocolHTTP {
		u = u.JoinPath("v1", "traces")
	}
	return u.String(), nil
}

// redactURL drops a URL's user information, which may hold a password,
// from what is logged or said in an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	return u.String()
}

// sampler is the sampler OTEL_TRACES_SAMPLER names, with its argument.
// The default follows the caller: a trace it samples is sampled here, and
// genq starts sampling none of its own that it would not.
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if c.SamplerArg != "" {
		r, err := strconv.ParseFloat(c.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", c.SamplerArg)
		}
		ratio = r
	}
	switch c.Sampler {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio or their parentbased_ forms", c.Sampler)
}

// resourceAttributes describe the process: OTEL_RESOURCE_ATTRIBUTES, then
// its service name over any given there.
func (c Config) resourceAttributes() ([]attribute.KeyValue, error) {
	pairs, err := parsePairs(c.ResourceAttributes, "OTEL_RESOURCE_ATTRIBUTES")
	if err != nil {
		return nil, err
	}
	var attrs []attribute.KeyValue
	for k, v := range pairs {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	return append(attrs, attribute.String("service.name", c.ServiceName)), nil
}

// parseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: key=value pairs, comma
// separated, values percent-encoded.
func parseHeaders(raw string) (map[string]string, error) {
	return parsePairs(raw, "OTEL_EXPORTER_OTLP_HEADERS")
}

// parsePairs reads the specification's list of key=value pairs. An error
// names the variable and the key, never the value: headers carry tokens.
func parsePairs(raw, name string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(raw, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: an item has no key=value form (item %d)", name, len(out)+1)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			// Not wrapped: url's error quotes the value, which may be a token.
			return nil, fmt.Errorf("%s: the value of %q is not percent-encoded", name, k)
		}
		out[k] = dec
	}
	return out, nil
}
