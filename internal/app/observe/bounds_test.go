package observe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/reqstate"
)

// pausedSpan runs a call of r that pauses through a guard traced into a
// span recorder, and returns its span.
func pausedSpan(t *testing.T, r *mrtr.Request) sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Observer: observe.NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))})
	f, err := g.Begin(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pause(nil, "ok"); err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), nil)
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	return spans[0]
}

// TestTracerBoundsRequestStrings: what a span takes from the request is
// bounded whatever the client sends: a 10 KB resource URI gives a span
// name and an mcp.resource.uri of at most 256 bytes of valid UTF-8 (a
// protobuf string must be, or the whole OTLP batch fails), a protocol
// version that is not a date and a method that is not pausable become
// _OTHER, and a tracestate past 512 bytes is not continued.
func TestTracerBoundsRequestStrings(t *testing.T) {
	uri := "file:///" + strings.Repeat("€", 10<<10/3)
	s := pausedSpan(t, &mrtr.Request{Method: "resources/read", ProtocolVersion: strings.Repeat("9", 1<<20), Target: uri,
		Meta: map[string]any{"traceparent": traceparent, "tracestate": "a=" + strings.Repeat("b", 600)}})
	a := attrs(s)
	got := a["mcp.resource.uri"]
	if len(got) > 256 || !utf8.ValidString(got) || !strings.HasPrefix(uri, strings.TrimSuffix(got, "…")) || len(got) < 200 {
		t.Errorf("mcp.resource.uri: %d bytes, valid UTF-8 %v: %q", len(got), utf8.ValidString(got), got)
	}
	if len(s.Name()) > 256 || !utf8.ValidString(s.Name()) || !strings.HasPrefix(s.Name(), "resources/read file:///€") {
		t.Errorf("span name: %d bytes, valid UTF-8 %v: %q", len(s.Name()), utf8.ValidString(s.Name()), s.Name())
	}
	if v := a["mcp.protocol.version"]; v != "_OTHER" {
		t.Errorf("mcp.protocol.version: %.40q, %d bytes", v, len(v))
	}
	if s.Parent().SpanID().String() != parentSpan || s.SpanContext().TraceState().Len() != 0 {
		t.Errorf("parent %s, tracestate %q: want the traceparent continued, the long tracestate not", s.Parent().SpanID(), s.SpanContext().TraceState())
	}
	for _, kv := range s.Attributes() {
		if n := len(kv.Value.Emit()); n > 256 {
			t.Errorf("attribute %s: %d bytes", kv.Key, n)
		}
	}

	// Well-formed values pass as they are; a method the guard does not
	// pause is not named.
	s = pausedSpan(t, &mrtr.Request{Method: "x/" + strings.Repeat("y", 1000), ProtocolVersion: "2026-07-28", Target: "t"})
	if a := attrs(s); s.Name() != "_OTHER t" || a["mcp.method.name"] != "_OTHER" || a["mcp.protocol.version"] != "2026-07-28" {
		t.Errorf("span %q %v", s.Name(), a)
	}
	for _, v := range []string{"2026-7-28", "2026-07-2x", "2026_07_28", "DRAFT-2026-v1", "2026-07-28 "} {
		if got := attrs(pausedSpan(t, &mrtr.Request{Method: "tools/call", ProtocolVersion: v, Target: "t"}))["mcp.protocol.version"]; got != "_OTHER" {
			t.Errorf("protocol version %q recorded as %q", v, got)
		}
	}
}

// TestOTLPSpanLimits: the provider OTLPTracing builds bounds every span it
// exports, whatever instrumentation adds to it: 1024 characters an
// attribute value, 32 attributes. Checked on what a collector receives.
func TestOTLPSpanLimits(t *testing.T) {
	got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("collector: %v", err)
		}
		got <- &req
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL) // the exporter reads the process environment
	getenv := func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}[k] }
	tp, err := observe.OTLPTracing(t.Context(), getenv, "mrtr-test", "v0")
	if err != nil || tp == nil {
		t.Fatalf("OTLPTracing: %v %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "big")
	for i := range 100 {
		span.SetAttributes(attribute.Key("k" + strconv.Itoa(i)).String(strings.Repeat("v", 10<<10)))
	}
	span.End()
	if err := tp.Shutdown(t.Context()); err != nil { // flushes
		t.Fatal(err)
	}
	var req *coltracepb.ExportTraceServiceRequest
	select {
	case req = <-got:
	default:
		t.Fatal("nothing exported by shutdown")
	}
	spans := req.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported", len(spans))
	}
	kvs := spans[0].GetAttributes()
	if len(kvs) != 32 || spans[0].GetDroppedAttributesCount() != 68 {
		t.Errorf("%d attributes exported, %d dropped: want 32 and 68", len(kvs), spans[0].GetDroppedAttributesCount())
	}
	for _, kv := range kvs {
		if n := len(kv.GetValue().GetStringValue()); n != 1024 {
			t.Errorf("attribute %s: %d bytes exported, want 1024", kv.GetKey(), n)
		}
	}
}

// TestSpanLimits: an OTEL_SPAN_*_LIMIT lower than mrtr's is kept, a
// higher one or none (negative) is not.
func TestSpanLimits(t *testing.T) {
	l := observe.SpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: -1, AttributeCountLimit: 8, EventCountLimit: 1000,
		LinkCountLimit: 0, AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: 128, AttributeValueDepthLimit: 64})
	want := sdktrace.SpanLimits{AttributeValueLengthLimit: 1024, AttributeCountLimit: 8, EventCountLimit: 16,
		LinkCountLimit: 0, AttributePerEventCountLimit: 16, AttributePerLinkCountLimit: 16, AttributeValueDepthLimit: 64}
	if l != want {
		t.Fatalf("SpanLimits = %+v, want %+v", l, want)
	}
}

// TestMetricsLabelsBounded: an outcome or store operation outside the
// fixed sets counts as "other", never as a label value of its own.
func TestMetricsLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := observe.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		odd := strings.Repeat("z", 100+i)
		m.Resumed(t.Context(), mrtr.ResumeEvent{Outcome: mrtr.Outcome(odd)})
		m.StoreCalled(t.Context(), mrtr.StoreEvent{Op: mrtr.StoreOp(odd), Outcome: mrtr.StoreOutcome(odd)})
		m.StoreCalled(t.Context(), mrtr.StoreEvent{Op: mrtr.StoreCommit, Outcome: mrtr.StoreOutcome(odd)})
	}
	if n := testutil.CollectAndCount(reg, "mrtr_resumes_total"); n != 10 {
		t.Errorf("%d resume series, want the 9 outcomes and other", n)
	}
	if n := testutil.CollectAndCount(reg, "mrtr_store_calls_total"); n != 14 {
		t.Errorf("%d store call series, want 12, other/other and commit/other", n)
	}
	if n := testutil.CollectAndCount(reg, "mrtr_store_call_duration_seconds"); n != 4 {
		t.Errorf("%d store latency series, want 3 ops and other", n)
	}
}
