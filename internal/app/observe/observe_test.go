package observe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

const (
	parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + parentTrace + "-" + parentSpan + "-01"
)

// server serves the demo tools over HTTP, guarded by a guard with obs and
// an in-memory single-use store.
func server(t *testing.T, obs mrtr.Observer) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Observer: obs})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(demo.NewServer(g, nil), nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

type answer struct {
	state, text string
	code        int
	reason      string
}

// call sends one raw 2026-07-28 request of method (tools/call,
// prompts/get) for name, with params and extra _meta entries.
func call(t *testing.T, url, method, name string, params, meta map[string]any) answer {
	t.Helper()
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	for k, v := range meta {
		m[k] = v
	}
	p := map[string]any{"name": name, "_meta": m}
	for k, v := range params {
		p[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	req, _ := http.NewRequest("POST", url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	data := string(raw)
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
		}
	}
	var msg struct {
		Result struct {
			RequestState string `json:"requestState"`
			Content      []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		t.Fatalf("HTTP %d: %v: %q", resp.StatusCode, err, raw)
	}
	a := answer{state: msg.Result.RequestState}
	if len(msg.Result.Content) > 0 {
		a.text = msg.Result.Content[0].Text
	}
	if msg.Error != nil {
		a.code, a.reason = msg.Error.Code, msg.Error.Data.Reason
	}
	return a
}

func deploy(t *testing.T, url, state string, meta map[string]any) answer {
	t.Helper()
	p := map[string]any{"arguments": map[string]any{"service": "api", "env": "staging"}}
	if state != "" {
		p["requestState"] = state
		p["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	}
	return call(t, url, "tools/call", "deploy", p, meta)
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// TestTracerSpans checks the spans of a paused call, its resume and a
// refused resume (none for an invalid token), recorded in memory: names,
// kind, MCP semantic convention attributes, error.type, timing, and the
// W3C trace context of the request's _meta continued (or a new trace
// without one).
func TestTracerSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	url := server(t, observe.NewTracer(tp))
	meta := map[string]any{"traceparent": traceparent, "tracestate": "vendor=x"}

	a := deploy(t, url, "", meta)
	if a.state == "" {
		t.Fatalf("first call: %+v", a)
	}
	if got := deploy(t, url, a.state, meta); got.text != "deployed api to staging" {
		t.Fatalf("resume: %+v", got)
	}
	if got := deploy(t, url, a.state, meta); got.reason != "replayed" {
		t.Fatalf("replay: %+v", got)
	}
	// A token we did not seal is refused without a span: anyone can send one.
	if got := deploy(t, url, a.state[:len(a.state)-4]+"AAAA", meta); got.reason != "invalid" {
		t.Fatalf("tampered: %+v", got)
	}
	if got := deploy(t, url, a.state, nil); got.reason != "replayed" {
		t.Fatalf("replay without a trace context: %+v", got)
	}
	// A call that neither resumes nor pauses has no span of ours.
	if got := call(t, url, "tools/call", "test_simple_text", map[string]any{"arguments": map[string]any{}}, meta); got.code != 0 || got.text == "" {
		t.Fatalf("test_simple_text: %+v", got)
	}

	spans := rec.Ended()
	if len(spans) != 4 {
		for _, s := range spans {
			t.Logf("span %s %v", s.Name(), attrs(s))
		}
		t.Fatalf("%d spans, want 4 (pause, resume, replayed, replayed again; none for invalid)", len(spans))
	}
	for i, s := range spans {
		a := attrs(s)
		if s.Name() != "tools/call deploy" || s.SpanKind() != trace.SpanKindServer ||
			a["mcp.method.name"] != "tools/call" || a["mcp.protocol.version"] != "2026-07-28" ||
			a["gen_ai.tool.name"] != "deploy" || a["gen_ai.operation.name"] != "execute_tool" {
			t.Errorf("span %d: %s %v %v", i, s.Name(), s.SpanKind(), a)
		}
		if !s.EndTime().After(s.StartTime()) && !s.EndTime().Equal(s.StartTime()) {
			t.Errorf("span %d ends before it starts", i)
		}
		if s.InstrumentationScope().Name != observe.ScopeName {
			t.Errorf("span %d: scope %q", i, s.InstrumentationScope().Name)
		}
	}
	// Continued from _meta: the same trace, the caller's span as parent,
	// its tracestate kept.
	for i, s := range spans[:3] {
		if s.SpanContext().TraceID().String() != parentTrace || s.Parent().SpanID().String() != parentSpan || !s.Parent().IsRemote() ||
			s.SpanContext().TraceState().Get("vendor") != "x" {
			t.Errorf("span %d: trace %s parent %s: not continued from _meta", i, s.SpanContext().TraceID(), s.Parent().SpanID())
		}
	}
	if s := spans[3]; s.SpanContext().TraceID().String() == parentTrace || s.Parent().IsValid() {
		t.Errorf("a request without traceparent joined a trace: %s", s.SpanContext().TraceID())
	}
	pause, resume, replayed, again := attrs(spans[0]), attrs(spans[1]), attrs(spans[2]), attrs(spans[3])
	if pause["mrtr.paused"] != "true" || pause["mrtr.resumed"] != "false" || pause["mrtr.round"] != "0" || pause["mrtr.key_id"] != "k1" || pause["error.type"] != "" {
		t.Errorf("pause span %v", pause)
	}
	if resume["mrtr.paused"] != "false" || resume["mrtr.resumed"] != "true" || resume["mrtr.round"] != "1" || resume["error.type"] != "" || spans[1].Status().Code == codes.Error {
		t.Errorf("resume span %v", resume)
	}
	if replayed["error.type"] != "replayed" || replayed["rpc.response.status_code"] != "-32602" || spans[2].Status().Code != codes.Error {
		t.Errorf("replayed span %v %v", replayed, spans[2].Status())
	}
	if again["error.type"] != "replayed" || again["mrtr.key_id"] != "" {
		t.Errorf("second replayed span %v", again)
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), a.state[6:20]) {
				t.Errorf("a span carries the token in %s", kv.Key)
			}
		}
	}
}

// TestTracerPromptAndStoreOutage: a prompt's span names the prompt, and a
// resume the store could not decide is error.type store_unavailable with
// -32603.
func TestTracerPromptAndStoreOutage(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := observe.NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: downStore{}, Observer: tr})
	r := &mrtr.Request{Method: "prompts/get", ProtocolVersion: "2026-07-28", Target: "context_prompt"}
	f, _ := g.Begin(t.Context(), r)
	tok, err := f.Pause(nil, "ctx")
	if err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), nil)
	r.RequestState = tok
	if _, err := g.Begin(t.Context(), r); !errors.Is(err, mrtr.ErrStoreUnavailable) {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	p, o := attrs(spans[0]), attrs(spans[1])
	if spans[0].Name() != "prompts/get context_prompt" || p["gen_ai.prompt.name"] != "context_prompt" || p["gen_ai.tool.name"] != "" {
		t.Errorf("prompt span %s %v", spans[0].Name(), p)
	}
	if o["error.type"] != "store_unavailable" || o["rpc.response.status_code"] != "-32603" {
		t.Errorf("outage span %v", o)
	}
}

type downStore struct{}

func (downStore) Reserve(context.Context, string, time.Time) (replay.Reservation, error) {
	return nil, errors.New("connection refused")
}

// TestMetricsObserver checks the counters one Observer call each makes,
// and that every outcome is exported from the start.
func TestMetricsObserver(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := observe.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := observe.NewMetrics(reg); err == nil {
		t.Fatal("registering twice did not fail")
	}
	ctx := t.Context()
	m.Paused(ctx, mrtr.PauseEvent{Round: 2, KeyID: "k1", TokenBytes: 300})
	m.Paused(ctx, mrtr.PauseEvent{Round: 1, TokenBytes: 200}) // a codec that names no key
	m.Resumed(ctx, mrtr.ResumeEvent{Outcome: mrtr.Outcome(mrtr.ReasonExpired)})
	m.StoreCalled(ctx, mrtr.StoreEvent{Op: mrtr.StoreReserve, Outcome: mrtr.StoreTimeout, Duration: 3 * time.Millisecond})
	want := `
# HELP mrtr_resumes_total Calls that carried a requestState, by outcome: ok, a rejection reason (invalid, expired, replayed, rounds_exceeded, arguments_changed), invalid_arguments (not I-JSON), store_unavailable or audit_unavailable (--audit-required).
# TYPE mrtr_resumes_total counter
mrtr_resumes_total{outcome="arguments_changed"} 0
mrtr_resumes_total{outcome="audit_unavailable"} 0
mrtr_resumes_total{outcome="expired"} 1
mrtr_resumes_total{outcome="invalid"} 0
mrtr_resumes_total{outcome="invalid_arguments"} 0
mrtr_resumes_total{outcome="ok"} 0
mrtr_resumes_total{outcome="replayed"} 0
mrtr_resumes_total{outcome="rounds_exceeded"} 0
mrtr_resumes_total{outcome="store_unavailable"} 0
# HELP mrtr_pauses_total Pauses sealed (requestStates issued), by the id of the key that sealed them.
# TYPE mrtr_pauses_total counter
mrtr_pauses_total{key_id="k1"} 1
mrtr_pauses_total{key_id="unknown"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mrtr_resumes_total", "mrtr_pauses_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "mrtr_store_calls_total"); n != 12 {
		t.Fatalf("%d store call series, want 3 ops x 4 outcomes", n)
	}
}

// TestHealth: the answers of /healthz and /readyz, a check that times out
// and one that fails, without the failure's text.
func TestHealth(t *testing.T) {
	h := &observe.Health{Timeout: 20 * time.Millisecond, Checks: []observe.Check{
		{Name: "keys", Fn: func(context.Context) error { return nil }},
		{Name: "store", Fn: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{Name: "other", Fn: func(context.Context) error { return errors.New("dial tcp 10.0.0.7:6379: refused") }},
	}}
	get := func(hf http.HandlerFunc, method string) (int, string) {
		w := httptest.NewRecorder()
		hf(w, httptest.NewRequest(method, "/", nil))
		if ct := w.Header().Get("Content-Type"); w.Code != 405 && ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	if code, body := get(h.Healthz, "GET"); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", code, body)
	}
	if code, body := get(h.Readyz, "GET"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","other":"unreachable","store":"timeout"}}` {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if code, _ := get(h.Readyz, "DELETE"); code != 405 {
		t.Fatalf("DELETE: %d", code)
	}
	var draining atomic.Bool
	h.Checks = append(h.Checks[:1], observe.Check{Name: "drain", Quiet: true, Fn: func(context.Context) error {
		if draining.Load() {
			return &observe.CheckError{Status: "draining", Err: errors.New("draining")}
		}
		return nil
	}})
	if code, body := get(h.Readyz, "GET"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok"}}` {
		t.Fatalf("readyz (a quiet check passing is left out): %d %s", code, body)
	}
	draining.Store(true)
	var logs bytes.Buffer
	h.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if code, body := get(h.Readyz, "GET"); code != 503 || body != `{"status":"unready","checks":{"drain":"draining","keys":"ok"}}` {
		t.Fatalf("readyz (a quiet check failing): %d %s", code, body)
	}
	if logs.Len() != 0 {
		t.Fatalf("a quiet check's failure was logged: %s", logs.String())
	}
}

// TestTracerThroughProxy: behind package proxy, the span of a paused
// call continues the trace context of the request's _meta too.
func TestTracerThroughProxy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
			"resultType": "input_required", "requestState": "upstream-state",
			"inputRequests": map[string]any{"ok": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object"}}}}}})
	}))
	defer up.Close()
	rec := tracetest.NewSpanRecorder()
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Observer: observe.NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))})
	h, err := proxy.New(proxy.Options{Upstream: up.URL, Guard: g, AnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	a := call(t, srv.URL, "tools/call", "t", nil, map[string]any{"traceparent": traceparent})
	if a.state == "" || a.state == "upstream-state" {
		t.Fatalf("first call through the proxy: %+v", a)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name() != "tools/call t" || s.SpanContext().TraceID().String() != parentTrace || s.Parent().SpanID().String() != parentSpan || attrs(s)["mrtr.paused"] != "true" {
		t.Fatalf("span %s trace %s parent %s %v", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), attrs(s))
	}
}
