package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/reqstate"
)

// rpcAnswer is what a raw tools/call got back.
type rpcAnswer struct {
	state      string // requestState of an input_required result
	resultType string
	text       string // first text content of a complete result
	code       int    // JSON-RPC error code, 0 for a result
	reason     string // error data's reason
	raw        string // the JSON-RPC message as received
}

// callDeploy sends one raw 2026-07-28 tools/call of the demo's deploy
// tool, with requestState and the confirm answer when state is set, and
// extra entries in params._meta.
func callDeploy(t *testing.T, url, env, state string, meta map[string]any) rpcAnswer {
	t.Helper()
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	for k, v := range meta {
		m[k] = v
	}
	params := map[string]any{"name": "deploy", "arguments": map[string]any{"service": "api", "env": env}, "_meta": m}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequest("POST", url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "deploy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	data := string(raw)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = ""
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = d
			}
		}
	}
	var msg struct {
		Result struct {
			ResultType   string `json:"resultType"`
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
	a := rpcAnswer{state: msg.Result.RequestState, resultType: msg.Result.ResultType}
	if len(msg.Result.Content) > 0 {
		a.text = msg.Result.Content[0].Text
	}
	if msg.Error != nil {
		a.code, a.reason = msg.Error.Code, msg.Error.Data.Reason
	}
	a.raw = data
	return a
}

// scrape reads a Prometheus text exposition into name{labels} -> value.
func scrape(t *testing.T, url string) (map[string]float64, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q", line)
		}
		out[line[:i]] = v
	}
	return out, string(raw)
}

// TestServeMetricsReadiness runs a scripted set of flows against `mrtr
// serve --metrics-addr` over a real Redis (accepted resumes, each
// rejection reason, an outage of Redis stopped by pid), checks the exact
// counters /metrics reports, and that /readyz turns unready while Redis
// is down and ready again after.
func TestServeMetricsReadiness(t *testing.T) {
	srv := testredis.StartServer(t)
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ring.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, data, 0o600); err != nil {
		t.Fatal(err)
	}
	url, logs := startServe(t, "--keys", keys, "--replay", srv.URL(), "--metrics-addr", "127.0.0.1:0", "--max-rounds", "3")
	metricsURL := testcmd.LogURL(t, logs, "mrtr metrics serving")
	base := strings.TrimSuffix(url, "/mcp")

	if code, body := testcmd.GetHealth(t, base+"/healthz"); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok","store":"ok"}}` {
		t.Fatalf("/readyz: %d %s", code, body)
	}

	// A: paused, resumed (ok), replayed, tampered (invalid).
	a := callDeploy(t, url, "staging", "", nil)
	if a.resultType != "input_required" || !strings.HasPrefix(a.state, "v1.k1.") {
		t.Fatalf("first call: %+v", a)
	}
	if got := callDeploy(t, url, "staging", a.state, nil); got.text != "deployed api to staging" {
		t.Fatalf("resume: %+v", got)
	}
	if got := callDeploy(t, url, "staging", a.state, nil); got.reason != "replayed" {
		t.Fatalf("replay: %+v", got)
	}
	tampered := a.state[:len(a.state)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(a.state, "AA")]
	if got := callDeploy(t, url, "staging", tampered, nil); got.reason != "invalid" {
		t.Fatalf("tampered: %+v", got)
	}
	// B: arguments changed.
	b := callDeploy(t, url, "staging", "", nil)
	if got := callDeploy(t, url, "production", b.state, nil); got.reason != "arguments_changed" {
		t.Fatalf("arguments changed: %+v", got)
	}
	// Expired, and past the round cap: tokens sealed with the server's key.
	seal := func(round int, issued time.Time) string {
		h, err := reqstate.HashArguments([]byte(`{"service":"api","env":"staging"}`))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := reqstate.New(ring, nil).Seal(reqstate.Binding{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", ServerID: "mrtr"},
			&reqstate.State{Round: round, IssuedAt: issued, ExpiresAt: issued.Add(time.Minute), ArgsHash: h, Asked: []string{"confirm"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if got := callDeploy(t, url, "staging", seal(1, time.Now().Add(-time.Hour)), nil); got.reason != "expired" {
		t.Fatalf("expired: %+v", got)
	}
	if got := callDeploy(t, url, "staging", seal(4, time.Now()), nil); got.reason != "rounds_exceeded" {
		t.Fatalf("rounds exceeded: %+v", got)
	}

	// C: paused, then Redis goes down: unready, and the resume fails closed.
	c := callDeploy(t, url, "staging", "", nil)
	srv.Stop()
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || !strings.HasPrefix(body, `{"status":"unready","checks":{"keys":"ok","store":"`) || strings.Contains(body, "127.0.0.1") {
		t.Fatalf("/readyz with Redis down: %d %s", code, body)
	}
	if got := callDeploy(t, url, "staging", c.state, nil); got.code != -32603 {
		t.Fatalf("resume with Redis down: %+v", got)
	}
	if code, _ := testcmd.GetHealth(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz with Redis down: %d", code)
	}
	// Redis back (empty): ready again, and C resumes.
	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := testcmd.GetHealth(t, base+"/readyz")
		if code == 200 && body == `{"status":"ok","checks":{"keys":"ok","store":"ok"}}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after Redis came back: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := callDeploy(t, url, "staging", c.state, nil); got.text != "deployed api to staging" {
		t.Fatalf("resume after Redis came back: %+v", got)
	}

	m, raw := scrape(t, metricsURL)
	// The outage's reserve failed either at once (connection refused) or
	// at --replay-timeout: one of the two.
	outage := m[`mrtr_store_calls_total{op="reserve",outcome="error"}`] + m[`mrtr_store_calls_total{op="reserve",outcome="timeout"}`]
	if outage != 1 {
		t.Errorf("reserve error+timeout = %v, want 1", outage)
	}
	for name, want := range map[string]float64{
		`mrtr_pauses_total{key_id="k1"}`:                          3, // A, B, C (the forged tokens were sealed here)
		`mrtr_key_seals_total{key_id="k1"}`:                       3,
		`mrtr_resumes_total{outcome="ok"}`:                        2, // A, C
		`mrtr_resumes_total{outcome="replayed"}`:                  1,
		`mrtr_resumes_total{outcome="invalid"}`:                   1,
		`mrtr_resumes_total{outcome="arguments_changed"}`:         1,
		`mrtr_resumes_total{outcome="expired"}`:                   1,
		`mrtr_resumes_total{outcome="rounds_exceeded"}`:           1,
		`mrtr_resumes_total{outcome="store_unavailable"}`:         1,
		`mrtr_store_calls_total{op="reserve",outcome="ok"}`:       2,
		`mrtr_store_calls_total{op="reserve",outcome="replayed"}`: 1,
		`mrtr_store_calls_total{op="commit",outcome="ok"}`:        2,
		`mrtr_store_calls_total{op="commit",outcome="error"}`:     0,
		`mrtr_store_calls_total{op="release",outcome="ok"}`:       0,
		`mrtr_store_call_duration_seconds_count{op="reserve"}`:    4,
		`mrtr_store_call_duration_seconds_count{op="commit"}`:     2,
		`mrtr_round_depth_count`:                                  3,
		`mrtr_round_depth_bucket{le="1"}`:                         3,
		`mrtr_token_size_bytes_count`:                             3,
		`mrtr_token_size_bytes_bucket{le="128"}`:                  0,
		`mrtr_token_size_bytes_bucket{le="256"}`:                  3,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %t), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "go_memstats_heap_alloc_bytes"} {
		if _, ok := m[name]; !ok {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
	// Low cardinality, nothing secret: no tool name, no token.
	for _, leak := range []string{"deploy", a.state[6:30], "staging"} {
		if strings.Contains(raw, leak) {
			t.Errorf("/metrics mentions %q", leak)
		}
	}
	for _, help := range []string{"# HELP mrtr_resumes_total ", "# TYPE mrtr_store_call_duration_seconds histogram", "# TYPE mrtr_pauses_total counter"} {
		if !strings.Contains(raw, help) {
			t.Errorf("/metrics lacks %q", help)
		}
	}
	// /metrics is not on the main listener.
	if code, _ := testcmd.GetHealth(t, base+"/metrics"); code != 404 {
		t.Errorf("/metrics on the main listener: HTTP %d", code)
	}
}

// TestServeHealthWithoutAuthOrMetrics: the probes answer without a
// credential while /mcp demands one, and without --metrics-addr no
// metrics listener starts.
func TestServeHealthWithoutAuthOrMetrics(t *testing.T) {
	url, logs := startServe(t, "--auth-hs256-secret", strings.Repeat("s", 32))
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok"}}` {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	if code, _ := testcmd.GetHealth(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("/mcp without a credential: HTTP %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/readyz", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("POST /readyz: HTTP %d", resp.StatusCode)
	}
	if strings.Contains(logs.String(), "mrtr metrics serving") {
		t.Fatal("a metrics listener started without --metrics-addr")
	}
	if !strings.Contains(logs.String(), `"metrics":false,"tracing":false`) {
		t.Fatalf("the policy line does not say metrics and tracing are off: %s", logs.String())
	}
}

// TestServeExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, `mrtr
// serve` exports the span of a paused call over OTLP/HTTP, continuing the
// trace of the request's _meta, and flushes it when it shuts down.
func TestServeExportsOTLP(t *testing.T) {
	got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("collector got %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "bad", 400)
			return
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(resp)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "mrtr-test")

	logs := new(testcmd.Buffer)
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs, Getenv: os.Getenv}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, a, []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"mrtr serving"`) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	url := testcmd.LogURL(t, logs, "mrtr serving")
	if !strings.Contains(logs.String(), "exporting spans over OTLP/HTTP") || !strings.Contains(logs.String(), `"tracing":true`) {
		t.Fatalf("tracing not announced: %s", logs.String())
	}
	if a := callDeploy(t, url, "staging", "", map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}); a.state == "" {
		t.Fatalf("first call: %+v", a)
	}
	cancel() // shutting down flushes the batch
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, logs.String())
	}
	var req *coltracepb.ExportTraceServiceRequest
	select {
	case req = <-got:
	default:
		t.Fatal("no span exported by shutdown")
	}
	rs := req.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
		t.Fatalf("export %v", req)
	}
	service := ""
	for _, kv := range rs[0].GetResource().GetAttributes() {
		if kv.GetKey() == "service.name" {
			service = kv.GetValue().GetStringValue()
		}
	}
	span := rs[0].GetScopeSpans()[0].GetSpans()[0]
	if service != "mrtr-test" || span.GetName() != "tools/call deploy" ||
		fmt.Sprintf("%x", span.GetTraceId()) != "4bf92f3577b34da6a3ce929d0e0e4736" || fmt.Sprintf("%x", span.GetParentSpanId()) != "00f067aa0ba902b7" {
		t.Fatalf("service %q, span %v", service, span)
	}
}

func TestOTLPProtocolRefused(t *testing.T) {
	code, _, errOut := runAppEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"serve", "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, `"grpc" is not supported`) {
		t.Fatalf("grpc protocol: exit %d, %s", code, errOut)
	}
}

// runAppEnv is runApp with the environment env, under the same deadline.
func runAppEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runAppGetenv(t, func(k string) string { return env[k] }, args...)
}

// TestProxyMetricsAndHealth: `mrtr proxy` takes --metrics-addr from the
// common flags and counts its pauses and resumes; its probes answer
// without the credential /mcp demands.
func TestProxyMetricsAndHealth(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				RequestState *string `json:"requestState"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		res := map[string]any{"resultType": "input_required", "requestState": "upstream-state",
			"inputRequests": map[string]any{"ok": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object"}}}}}
		if req.Params.RequestState != nil {
			res = map[string]any{"resultType": "complete", "content": []any{}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res})
	}))
	defer up.Close()
	url, logs := startProxyCmd(t, "--upstream", up.URL, "--metrics-addr", "127.0.0.1:0")
	metricsURL := testcmd.LogURL(t, logs, "mrtr metrics serving")
	base := strings.TrimSuffix(url, "/mcp")
	call := func(state string) map[string]any {
		params := map[string]any{"name": "t", "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
		if state != "" {
			params["requestState"] = state
			params["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept"}}
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		resp, err := http.Post(url, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var msg map[string]any
		json.NewDecoder(resp.Body).Decode(&msg)
		return msg
	}
	first := call("")
	res, _ := first["result"].(map[string]any)
	tok, _ := res["requestState"].(string)
	if tok == "" || tok == "upstream-state" {
		t.Fatalf("first call through the proxy: %v", first)
	}
	if got := call(tok); got["result"] == nil {
		t.Fatalf("resume: %v", got)
	}
	if got := call(tok); got["error"] == nil {
		t.Fatalf("replay accepted: %v", got)
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok","upstream":"ok"}}` {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	m, _ := scrape(t, metricsURL)
	for name, want := range map[string]float64{
		`mrtr_pauses_total{key_id="ephemeral"}`:                   1,
		`mrtr_resumes_total{outcome="ok"}`:                        1,
		`mrtr_resumes_total{outcome="replayed"}`:                  1,
		`mrtr_store_calls_total{op="reserve",outcome="replayed"}`: 1,
	} {
		if got := m[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
