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
//
// The provider's span limits are SpanLimits: the OTEL_SPAN_*_LIMIT
// variables may lower them, never raise them.
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
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(SpanLimits(sdktrace.NewSpanLimits()))), nil
}

// Span limits of OTLPTracing: the SDK's defaults leave attribute values
// unbounded and allow 128 of everything. A span waits in the exporter's
// queue (2048 spans) while the collector is slow or down, so its size is
// memory held per request. mrtr's own spans carry at most a dozen
// attributes, none longer than 256 bytes, and no events or links.
const (
	maxAttrValueLen = 1024 // characters, as the SDK counts: a 256-byte target fits whatever its script
	maxAttrs        = 32
	maxEventsLinks  = 16
)

// SpanLimits returns l with every limit at most mrtr's: an attribute value
// of at most 1024 characters, 32 attributes a span, 16 events and 16
// links a span and 16 attributes each. A limit of l already lower (from
// an OTEL_SPAN_*_LIMIT variable) is kept; a negative one (no limit) is not.
func SpanLimits(l sdktrace.SpanLimits) sdktrace.SpanLimits {
	capAt := func(v *int, limit int) {
		if *v < 0 || *v > limit {
			*v = limit
		}
	}
	capAt(&l.AttributeValueLengthLimit, maxAttrValueLen)
	capAt(&l.AttributeCountLimit, maxAttrs)
	capAt(&l.EventCountLimit, maxEventsLinks)
	capAt(&l.LinkCountLimit, maxEventsLinks)
	capAt(&l.AttributePerEventCountLimit, maxEventsLinks)
	capAt(&l.AttributePerLinkCountLimit, maxEventsLinks)
	return l
}
