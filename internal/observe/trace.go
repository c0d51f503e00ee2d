package observe

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mrtr-go/mrtr"
)

// ScopeName is the instrumentation scope of mrtr's spans.
const ScopeName = "github.com/mrtr-go/mrtr"

// maxTargetLen caps the tool, prompt or resource name in a span: it comes
// from the request.
const maxTargetLen = 256

// Attributes mrtr adds to the MCP semantic conventions.
const (
	AttrRound      = attribute.Key("mrtr.round")       // the flow's round when the call came in (0: a first call)
	AttrResumed    = attribute.Key("mrtr.resumed")     // the call carried an accepted requestState
	AttrPaused     = attribute.Key("mrtr.paused")      // the call sealed a pause
	AttrKeyID      = attribute.Key("mrtr.key_id")      // the key that sealed the pause
	AttrTokenBytes = attribute.Key("mrtr.token.bytes") // the size of the requestState sealed
)

// Tracer is an mrtr.Observer that records one span for every call that
// resumed or paused a flow, and one for every refused resume, following
// the OpenTelemetry semantic conventions for MCP: span name
// "{mcp.method.name} {target}", kind server, mcp.method.name,
// mcp.protocol.version, gen_ai.tool.name (with gen_ai.operation.name
// execute_tool), gen_ai.prompt.name or mcp.resource.uri, and on a refusal
// error.type = the rejection reason (or store_unavailable) with the
// JSON-RPC code in rpc.response.status_code. A W3C trace context in the
// request's _meta (traceparent, tracestate) becomes the span's parent;
// without one, the span continues whatever span ctx carries.
//
// Spans are recorded when the call ends, with the call's start and end
// times; a handler's own spans are not their children. A Tracer is safe
// for concurrent use.
type Tracer struct {
	mrtr.NopObserver
	tracer trace.Tracer
	prop   propagation.TraceContext
	server trace.SpanStartOption // built once: options are interfaces
}

// NewTracer returns a Tracer whose spans go to tp.
func NewTracer(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName), server: trace.WithSpanKind(trace.SpanKindServer)}
}

// Resumed records a span for a refused resume.
func (t *Tracer) Resumed(ctx context.Context, e mrtr.ResumeEvent) {
	if e.Outcome == mrtr.OutcomeOK {
		return // the call's span is recorded when it ends
	}
	code := mrtr.CodeInvalidParams
	if e.Outcome == mrtr.OutcomeStoreUnavailable {
		code = mrtr.CodeInternalError
	}
	var buf [8]attribute.KeyValue
	_, span := t.start(ctx, e.Call, append(buf[:0],
		semconv.ErrorTypeKey.String(string(e.Outcome)),
		semconv.RPCResponseStatusCodeKey.String(strconv.Itoa(code))))
	span.SetStatus(codes.Error, mrtr.RejectMessage)
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// Ended records the span of a call that resumed or paused.
func (t *Tracer) Ended(ctx context.Context, e mrtr.EndEvent) {
	if !e.Resumed && !e.Paused {
		return
	}
	var buf [11]attribute.KeyValue
	extra := append(buf[:0], AttrRound.Int(e.Round), AttrResumed.Bool(e.Resumed), AttrPaused.Bool(e.Paused))
	if e.Paused {
		extra = append(extra, AttrKeyID.String(e.KeyID), AttrTokenBytes.Int(e.TokenBytes))
	}
	if e.Failed {
		// The handler's error: its kind is the handler's business.
		extra = append(extra, semconv.ErrorTypeOther)
	}
	_, span := t.start(ctx, e.Call, extra)
	if e.Failed {
		span.SetStatus(codes.Error, "handler error")
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// start starts the span of call c with the MCP attributes followed by
// attrs, which must have room for four more.
func (t *Tracer) start(ctx context.Context, c mrtr.Call, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	if len(c.Meta) > 0 {
		if pctx := t.prop.Extract(ctx, metaCarrier(c.Meta)); trace.SpanContextFromContext(pctx).IsValid() {
			ctx = pctx
		}
	}
	target := c.Target
	if len(target) > maxTargetLen {
		target = target[:maxTargetLen]
	}
	attrs = append(attrs, semconv.McpMethodNameKey.String(c.Method))
	if c.ProtocolVersion != "" {
		attrs = append(attrs, semconv.McpProtocolVersionKey.String(c.ProtocolVersion))
	}
	switch c.Method {
	case "tools/call":
		attrs = append(attrs, semconv.GenAIToolNameKey.String(target), semconv.GenAIOperationNameExecuteTool)
	case "prompts/get":
		attrs = append(attrs, semconv.GenAIPromptNameKey.String(target))
	case "resources/read":
		attrs = append(attrs, semconv.McpResourceURIKey.String(target))
	}
	name := c.Method
	if target != "" {
		name += " " + target
	}
	return t.tracer.Start(ctx, name,
		t.server,
		trace.WithTimestamp(c.Start),
		trace.WithAttributes(attrs...))
}

// metaCarrier reads a W3C trace context from an MCP _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(string, string) {} // extraction only

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
