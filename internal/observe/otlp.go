package observe

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
)

// OTLPTracing returns a tracer provider that exports spans over OTLP/HTTP
// when getenv shows the standard variables asking for it, or nil when
// they do not: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT set, OTEL_SDK_DISABLED not true and
// OTEL_TRACES_EXPORTER unset or otlp. The exporter reads the rest of the
// OTEL_EXPORTER_OTLP_* variables itself (headers, timeout, compression,
// certificates) from the process environment, and the SDK reads
// OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES; OTEL_SERVICE_NAME
// defaults to service. Only the http/protobuf protocol is built in: a
// protocol of grpc or http/json is an error. Shut the provider down to
// flush its last spans.
func OTLPTracing(ctx context.Context, getenv func(string) string, service, version string) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return nil, nil
	}
	switch e := getenv("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("$OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", e)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTLP protocol %q is not supported: mrtr exports traces over http/protobuf only", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	if getenv("OTEL_SERVICE_NAME") != "" {
		service = getenv("OTEL_SERVICE_NAME")
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, fmt.Errorf("OTLP resource: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
