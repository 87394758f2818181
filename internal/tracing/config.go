package tracing

import "github.com/genq/genq/internal/envflag"

// Config is the process's tracing, in OpenTelemetry's standard variables,
// so that a deployment configures genq as it does its other services.
type Config struct {
	// Endpoint is OTLP's base URL; TracesEndpoint, when set, the traces'
	// own, taken as it is. With neither, tracing is off.
	Endpoint       string
	TracesEndpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// Headers go with every export (a collector's token): a secret.
	Headers     string
	ServiceName string
	// ResourceAttributes are key=value pairs that describe the process.
	ResourceAttributes string
	Sampler            string
	SamplerArg         string
	Disabled           bool
}

// RegisterFlags binds the tracing settings; service is the process's
// default service name.
func (c *Config) RegisterFlags(fs *envflag.Set, service string) {
	fs.String(&c.Endpoint, "otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "",
		"OTLP base URL traces are exported to, e.g. http://collector:4318 (http/protobuf adds /v1/traces) or http://collector:4317 (grpc); empty: tracing off")
	fs.String(&c.TracesEndpoint, "otlp-traces-endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "",
		"OTLP URL of traces alone, taken as it is; overrides OTEL_EXPORTER_OTLP_ENDPOINT")
	fs.String(&c.Protocol, "otlp-protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", ProtocolHTTP, "OTLP transport: http/protobuf or grpc")
	fs.Secret(&c.Headers, "otlp-headers", "OTEL_EXPORTER_OTLP_HEADERS", "key=value pairs, comma-separated, sent with every export (a collector's credentials)")
	fs.String(&c.ServiceName, "otel-service-name", "OTEL_SERVICE_NAME", service, "service.name of this process's spans")
	fs.String(&c.ResourceAttributes, "otel-resource-attributes", "OTEL_RESOURCE_ATTRIBUTES", "", "key=value pairs, comma-separated, added to this process's spans' resource")
	fs.String(&c.Sampler, "otel-traces-sampler", "OTEL_TRACES_SAMPLER", "parentbased_always_on",
		"always_on, always_off, traceidratio, or their parentbased_ forms (follow the caller's sampled flag)")
	fs.String(&c.SamplerArg, "otel-traces-sampler-arg", "OTEL_TRACES_SAMPLER_ARG", "", "the ratio of traceidratio samplers, 0 to 1 (empty: 1)")
	fs.Bool(&c.Disabled, "otel-sdk-disabled", "OTEL_SDK_DISABLED", false, "turn tracing off whatever the endpoint")
}
