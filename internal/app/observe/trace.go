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
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/task"
)

// ScopeName is the instrumentation scope of mrtr's spans.
const ScopeName = "github.com/mrtr-go/mrtr"

// other stands for a value from the request that is not one a span may
// carry: a method that is not pausable, a protocol version that is not a
// date, as the semantic conventions' _OTHER does for an unknown HTTP
// method. The client's bytes never reach the span.
const other = "_OTHER"

// maxTraceState is the longest tracestate continued from a request's
// _meta: W3C Trace Context asks propagators to carry at least 512
// characters, and the span keeps what it continues.
const maxTraceState = 512

// Attributes mrtr adds to the MCP semantic conventions.
const (
	AttrRound      = attribute.Key("mrtr.round")       // the flow's round when the call came in (0: a first call)
	AttrResumed    = attribute.Key("mrtr.resumed")     // the call carried an accepted requestState
	AttrPaused     = attribute.Key("mrtr.paused")      // the call sealed a pause
	AttrKeyID      = attribute.Key("mrtr.key_id")      // the key that sealed the pause
	AttrTokenBytes = attribute.Key("mrtr.token.bytes") // the size of the requestState sealed
)

// Tracer is an mrtr.Observer that records one span for every call that
// resumed or paused a flow, and one for every refused resume but an
// invalid one, following
// the OpenTelemetry semantic conventions for MCP: span name
// "{mcp.method.name} {target}", kind server, mcp.method.name,
// mcp.protocol.version, gen_ai.tool.name (with gen_ai.operation.name
// execute_tool), gen_ai.prompt.name or mcp.resource.uri, and on a refusal
// error.type = the rejection reason (or store_unavailable) with the
// JSON-RPC code in rpc.response.status_code. A W3C trace context in the
// request's _meta (traceparent, tracestate) becomes the span's parent;
// without one, the span continues whatever span ctx carries.
//
// Everything a span takes from the request is bounded: the target is cut
// to 256 bytes of valid UTF-8 (mcpwire.Shown), and so is the span name; a
// method other than the three pausable ones and a protocol version that
// is not a date (YYYY-MM-DD) are recorded as _OTHER; a tracestate longer
// than 512 bytes is not continued. A refusal with reason invalid (a token
// this server did not seal for this call and principal, which any client
// can send at no cost) makes no span: mrtr_resumes_total and the guard's
// log count those, and a flood of them would otherwise fill the
// exporter's queue and crowd out the spans of real calls.
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
	switch e.Outcome {
	case mrtr.OutcomeOK:
		return // the call's span is recorded when it ends
	case mrtr.Outcome(mrtr.ReasonInvalid):
		return // anyone can send one: counted, logged, not traced
	}
	code := mrtr.CodeInvalidParams
	if e.Outcome == mrtr.OutcomeStoreUnavailable {
		code = mrtr.CodeInternalError
	}
	var buf [8]attribute.KeyValue
	_, span := t.start(ctx, e.Call, append(buf[:0],
		semconv.ErrorTypeKey.String(errorType(e.Outcome)),
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
	return t.startKind(ctx, c, t.server, attrs)
}

// startKind is start with a span kind.
func (t *Tracer) startKind(ctx context.Context, c mrtr.Call, kind trace.SpanStartOption, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	if len(c.Meta) > 0 {
		if pctx := t.prop.Extract(ctx, metaCarrier(c.Meta)); trace.SpanContextFromContext(pctx).IsValid() {
			ctx = pctx
		}
	}
	target := mcpwire.Shown(c.Target)
	method := c.Method
	if !mcpwire.Pausable(method) && !task.IsMethod(method) {
		method = other
	}
	attrs = append(attrs, semconv.McpMethodNameKey.String(method))
	if c.ProtocolVersion != "" {
		attrs = append(attrs, semconv.McpProtocolVersionKey.String(protocolVersion(c.ProtocolVersion)))
	}
	switch method {
	case mcpwire.MethodCallTool:
		attrs = append(attrs, semconv.GenAIToolNameKey.String(target), semconv.GenAIOperationNameExecuteTool)
	case mcpwire.MethodGetPrompt:
		attrs = append(attrs, semconv.GenAIPromptNameKey.String(target))
	case mcpwire.MethodReadResource:
		attrs = append(attrs, semconv.McpResourceURIKey.String(target))
	}
	name := method
	if target != "" {
		name = mcpwire.Shown(name + " " + target)
	}
	return t.tracer.Start(ctx, name,
		kind,
		trace.WithTimestamp(c.Start),
		trace.WithAttributes(attrs...))
}

// protocolVersion returns v when it has the shape of an MCP protocol
// version, a date (YYYY-MM-DD), and _OTHER when it does not.
func protocolVersion(v string) string {
	if len(v) != len("2026-07-28") {
		return other
	}
	for i := range len(v) {
		if i == 4 || i == 7 {
			if v[i] != '-' {
				return other
			}
		} else if v[i] < '0' || v[i] > '9' {
			return other
		}
	}
	return v
}

// errorType returns the error.type of a refusal: its outcome, one of the
// guard's fixed set, or _OTHER.
func errorType(o mrtr.Outcome) string {
	switch o {
	case mrtr.Outcome(mrtr.ReasonInvalid), mrtr.Outcome(mrtr.ReasonExpired), mrtr.Outcome(mrtr.ReasonReplayed),
		mrtr.Outcome(mrtr.ReasonRoundsExceeded), mrtr.Outcome(mrtr.ReasonArgumentsChanged),
		mrtr.OutcomeInvalidArguments, mrtr.OutcomeStoreUnavailable:
		return string(o)
	}
	return other
}

// metaCarrier reads a W3C trace context from an MCP _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	if key == "tracestate" && len(s) > maxTraceState {
		return ""
	}
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
