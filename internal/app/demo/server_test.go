package demo_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/reqstate"
)

const (
	modern = "2026-07-28"
	legacy = "2025-11-25"
)

// wires are the two protocol generations every demo tool is driven on.
var wires = []string{modern, legacy}

type testServer struct {
	url   string
	guard *mrtr.Guard
}

// start serves demo.NewServer over loopback HTTP through
// gosdk.NewHTTPHandler, as `mrtr serve` does.
func start(t *testing.T, gopts *mrtr.Options, dopts *demo.Options) *testServer {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := mrtr.New(reqstate.New(ring, nil), gopts)
	s := demo.NewServer(g, dopts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", gosdk.NewHTTPHandler(s, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &testServer{url: srv.URL + "/mcp", guard: g}
}

// clientOpts configures a go-sdk client for connect.
type clientOpts struct {
	wire     string // modern by default
	manual   bool   // disable the client's MRTR loop
	elicit   func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)
	sample   func(*mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error)
	log      func(*mcp.LoggingMessageParams)
	progress func(*mcp.ProgressNotificationParams)
	roots    []*mcp.Root
}

func connect(t *testing.T, ts *testServer, o clientOpts) *mcp.ClientSession {
	t.Helper()
	copts := &mcp.ClientOptions{}
	if o.elicit != nil {
		copts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return o.elicit(r) }
	}
	if o.sample != nil {
		copts.CreateMessageWithToolsHandler = func(ctx context.Context, r *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return o.sample(r)
		}
	}
	if o.log != nil {
		copts.LoggingMessageHandler = func(ctx context.Context, r *mcp.LoggingMessageRequest) { o.log(r.Params) }
	}
	if o.progress != nil {
		copts.ProgressNotificationHandler = func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) { o.progress(r.Params) }
	}
	if o.manual {
		copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
		if copts.ElicitationHandler == nil { // declares elicitation; the test answers by hand
			copts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return nil, errors.New("answered by hand")
			}
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1"}, copts)
	c.AddRoots(o.roots...)
	var sopts *mcp.ClientSessionOptions
	if o.wire == legacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: legacy}
	}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.url}, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func accept(content map[string]any) func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: content}, nil
	}
}

// wantRejected checks a JSON-RPC error of mrtr's error contract.
func wantRejected(t *testing.T, err error, reason mrtr.Reason) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v (%T), want a JSON-RPC error", err, err)
	}
	var data struct{ Reason string }
	_ = json.Unmarshal(je.Data, &data)
	if je.Code != mrtr.CodeInvalidParams || je.Message != mrtr.RejectMessage || data.Reason != string(reason) {
		t.Fatalf("error %d %q data %s, want -32602 %q reason %s", je.Code, je.Message, je.Data, mrtr.RejectMessage, reason)
	}
}

// --- raw 2026-07-28 requests, shaped like the conformance harness's ---

// allCaps is the harness's default clientCapabilities.
var allCaps = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{"listChanged": true}}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type rawReply struct {
	status int
	Result map[string]any `json:"result"`
	Error  *rpcError      `json:"error"`
}

func (r *rawReply) resultType() string { s, _ := r.Result["resultType"].(string); return s }

func (r *rawReply) state() string { s, _ := r.Result["requestState"].(string); return s }

func (r *rawReply) inputKeys() []string {
	m, _ := r.Result["inputRequests"].(map[string]any)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r *rawReply) inputMethod(key string) string {
	m, _ := r.Result["inputRequests"].(map[string]any)
	e, _ := m[key].(map[string]any)
	s, _ := e["method"].(string)
	return s
}

func (r *rawReply) text() string {
	var b strings.Builder
	items, _ := r.Result["content"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m["type"] == "text" {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

var rawID atomic.Int64

// raw sends one stateless 2026-07-28 request the way the conformance
// harness does: its own POST, the Mcp-* headers, _meta in params. caps
// nil means allCaps.
func raw(t *testing.T, url, method string, params map[string]any, caps map[string]any) *rawReply {
	t.Helper()
	if caps == nil {
		caps = allCaps
	}
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modern,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	id := rawID.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modern)
	req.Header.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		req.Header.Set("Mcp-Name", p["name"].(string))
	case "resources/read":
		req.Header.Set("Mcp-Name", p["uri"].(string))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	msg := data
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal([]byte(line), &probe) == nil && string(probe.ID) == jsonInt(id) {
				msg = []byte(line)
			}
		}
	}
	r := &rawReply{status: resp.StatusCode}
	if err := json.Unmarshal(msg, r); err != nil {
		t.Fatalf("%s: undecodable reply (HTTP %d): %s", method, resp.StatusCode, data)
	}
	if r.Result == nil && r.Error == nil {
		t.Fatalf("%s: reply has neither result nor error: %s", method, data)
	}
	return r
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// callRaw is raw for tools/call.
func callRaw(t *testing.T, url, name string, extra map[string]any, caps map[string]any) *rawReply {
	t.Helper()
	p := map[string]any{"name": name, "arguments": map[string]any{}}
	for k, v := range extra {
		p[k] = v
	}
	return raw(t, url, "tools/call", p, caps)
}

func elicitAnswer(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

var samplingAnswer = map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "Paris"}, "model": "test-model", "stopReason": "endTurn"}

var rootsAnswer = map[string]any{"roots": []any{map[string]any{"uri": "file:///test/root", "name": "Test Root"}}}

func wantInputRequired(t *testing.T, r *rawReply, keys ...string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d %q, want input_required", r.Error.Code, r.Error.Message)
	}
	if r.resultType() != "input_required" {
		t.Fatalf("resultType %q (%v), want input_required", r.resultType(), r.Result)
	}
	if got := r.inputKeys(); !slices.Equal(got, keys) {
		t.Fatalf("input request keys %v, want %v", got, keys)
	}
	if r.state() == "" {
		t.Fatal("input_required without a requestState")
	}
}

func wantComplete(t *testing.T, r *rawReply, textPattern string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d %q, want a complete result", r.Error.Code, r.Error.Message)
	}
	if r.resultType() != "complete" {
		t.Fatalf("resultType %q (%v), want complete", r.resultType(), r.Result)
	}
	if textPattern != "" && !regexp.MustCompile(textPattern).MatchString(r.text()) {
		t.Fatalf("text %q does not match %q", r.text(), textPattern)
	}
}

func wantRawRejected(t *testing.T, r *rawReply, reason mrtr.Reason) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("result %v, want a JSON-RPC error", r.Result)
	}
	var data struct{ Reason string }
	_ = json.Unmarshal(r.Error.Data, &data)
	if r.Error.Code != mrtr.CodeInvalidParams || r.Error.Message != mrtr.RejectMessage || data.Reason != string(reason) {
		t.Fatalf("error %d %q data %s, want -32602 %q reason %s", r.Error.Code, r.Error.Message, r.Error.Data, mrtr.RejectMessage, reason)
	}
	if r.status != http.StatusBadRequest {
		t.Errorf("HTTP %d, want 400", r.status)
	}
}
