package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
)

// stdioServerEnv makes this test binary an MCP server over stdio:
// "modern" is go-sdk's dual-era server as is; "legacy" refuses
// server/discover, as a 2025-11-25 server does, so the proxy bridges it;
// "fragile" answers a state not starting "delete:" with -32603; a kind
// ending in "+exit" has a tool "exit" that makes the child exit.
// The proxy passes the variable with --upstream-env: it is no MRTR_*
// variable, which never reach the child.
const stdioServerEnv = "STDIO_TEST_SERVER"

func runStdioServer(kind string) {
	kind, withExit := strings.CutSuffix(kind, "+exit")
	if kind == "legacylog" { // legacy, logging as mrtr serve --stdio does: log/slog's text on stderr
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("NO KEY RING GIVEN: the test child's warning", "pid", 1)
		kind = "legacy"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-" + kind, Version: "1"}, nil)
	type item struct {
		Item string `json:"item"`
	}
	// An input request in the 2026-07-28 style: go-sdk sends it as a
	// mid-call elicitation/create to a 2025-11-25 client (the bridge) and
	// re-invokes the handler with the answer.
	mcp.AddTool(s, &mcp.Tool{Name: "delete"}, func(ctx context.Context, req *mcp.CallToolRequest, in item) (*mcp.CallToolResult, any, error) {
		ans, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: "Delete " + in.Item + "?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}},
			}}, RequestState: "delete:" + in.Item}, nil, nil
		}
		if ans.Action != "accept" || ans.Content["ok"] != true {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + in.Item}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Item}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		var names []string
		for _, kv := range os.Environ() {
			if n, _, _ := strings.Cut(kv, "="); strings.HasPrefix(n, "MRTR_") || n == "EXTRA" {
				names = append(names, kv)
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(names, " ")}}}, nil, nil
	})
	if withExit {
		// "exit" ends the child before it answers: a caller's input
		// that crashes the server.
		mcp.AddTool(s, &mcp.Tool{Name: "exit"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	}
	if kind == "legacy" {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "server/discover" {
					return nil, &jsonrpcError{Code: -32601, Message: "Method not found"}
				}
				return next(ctx, method, req)
			}
		})
	}
	if kind == "fragile" {
		// Fails on a state it did not issue, with JSON-RPC's Internal
		// error: the stdio probe reads that as a server error.
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params.RequestState != "" && !strings.HasPrefix(r.Params.RequestState, "delete:") {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
				return next(ctx, method, req)
			}
		})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

type jsonrpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *jsonrpcError) Error() string { return e.Message }

// rpcPost sends one 2026-07-28 request, with its _meta and standard
// headers, and returns its result or error.
func rpcPost(t *testing.T, url, method string, params map[string]any) (result map[string]json.RawMessage, rpcErr map[string]json.RawMessage) {
	t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}
	if extra, ok := params["_meta"].(map[string]any); ok { // a caller's own _meta members (audit_test.go)
		maps.Copy(meta, extra)
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	// The headers a 2026-07-28 client sends; a server over HTTP (and the
	// proxy in front of a stdio child) refuses a request without them.
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"id":1`) {
				raw = []byte(d)
			}
		}
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not JSON-RPC: %s", method, raw)
	}
	return m.Result, m.Error
}

// TestProxyCommandUpstream: `mrtr proxy -- COMMAND` runs the upstream as a
// child over stdio, finds its era, and seals its pauses either way: a
// modern child's own input_required, or a legacy child's mid-call
// elicitation through the bridge. The child never sees MRTR_* variables
// but gets --upstream-env.
func TestProxyCommandUpstream(t *testing.T) {
	t.Setenv("MRTR_KEYS", "must-not-reach-the-child")
	for _, kind := range []string{"modern", "legacy"} {
		t.Run(kind, func(t *testing.T) {
			url, logs := startProxyCmd(t, "--upstream-env", stdioServerEnv+"="+kind, "--upstream-env", "EXTRA=1", "--", os.Args[0])
			want := map[string]string{"modern": "the upstream speaks 2026-07-28", "legacy": "the upstream speaks 2025-11-25"}[kind]
			if !strings.Contains(logs.String(), want) {
				t.Fatalf("no startup line %q:\n%s", want, logs.String())
			}
			args := map[string]any{"item": "a"}
			res, e := rpcPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args})
			var tok string
			json.Unmarshal(res["requestState"], &tok)
			if e != nil || string(res["resultType"]) != `"input_required"` || !strings.HasPrefix(tok, "v1.") {
				t.Fatalf("first call: %v %v", res, e)
			}
			var irs map[string]json.RawMessage
			json.Unmarshal(res["inputRequests"], &irs)
			if len(irs) != 1 {
				t.Fatalf("inputRequests %s", res["inputRequests"])
			}
			var key string
			for key = range irs {
			}
			answers := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
			res, e = rpcPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok, "inputResponses": answers})
			if e != nil || !strings.Contains(string(res["content"]), "deleted a") {
				t.Fatalf("resume: %v %v", res, e)
			}
			_, e = rpcPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok, "inputResponses": answers})
			if e == nil || !strings.Contains(string(e["data"]), "replayed") {
				t.Fatalf("replay: %v", e)
			}
			res, e = rpcPost(t, url, "tools/call", map[string]any{"name": "env", "arguments": map[string]any{}})
			if e != nil || !strings.Contains(string(res["content"]), "EXTRA=1") || strings.Contains(string(res["content"]), "MRTR_") {
				t.Fatalf("the child's environment: %v %v", res, e)
			}
		})
	}
}

// TestParseProxyCommand: what follows -- is the command, never flags.
func TestParseProxyCommand(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := proxy.ParseProxy(a, []string{"--upstream-era", "legacy", "--roots", "file:///a", "--", "npx", "-y", "pkg", "--addr", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Command, " ") != "npx -y pkg --addr x" || c.Era != "legacy" || len(c.Roots) != 1 || c.Addr == "x" {
		t.Fatalf("parsed %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--"}, "-- must be followed by the command"},
		{[]string{"--upstream", "http://x/mcp", "--", "cmd"}, "both name an upstream"},
		{[]string{"--upstream-era", "old", "--", "cmd"}, "--upstream-era"},
		{[]string{"--upstream-env", "=x", "--", "cmd"}, "--upstream-env"},
	} {
		a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		c, err := proxy.ParseProxy(a, tc.args)
		if err == nil && tc.want == "--upstream-env" {
			_, _, err = c.UpstreamTransport(context.Background(), nil, nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestProxyCommandUpstreamObserved: /metrics counts a command upstream's
// processes and held calls, and /readyz turns unready while the upstream
// cannot be started.
func TestProxyCommandUpstreamObserved(t *testing.T) {
	url, logs := startProxyCmd(t, "--metrics-addr", "127.0.0.1:0", "--upstream-env", stdioServerEnv+"=legacy", "--", os.Args[0])
	metrics := logURL(t, logs, "mrtr metrics serving")
	base := strings.TrimSuffix(url, "/mcp")
	res, e := rpcPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}})
	if e != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("pause: %v %v", res, e)
	}
	_, body := getHealth(t, metrics)
	for _, want := range []string{"mrtr_bridge_held_calls 1", "mrtr_upstream_processes 1", "mrtr_upstream_processes_idle 0", "mrtr_upstream_notifications_dropped_total 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := getHealth(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"upstream":"ok"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}

	// An upstream that exits at once: the proxy serves, but is not ready.
	url, _ = startProxyCmd(t, "--upstream-era", "legacy", "--", "/bin/false")
	base = strings.TrimSuffix(url, "/mcp")
	if _, e := rpcPost(t, url, "tools/list", map[string]any{}); e == nil || !strings.Contains(string(e["message"]), "could not be") {
		t.Fatalf("a call to an upstream that cannot start: %v", e)
	}
	if code, body := getHealth(t, base+"/readyz"); code != 503 || !strings.Contains(body, `"upstream"`) {
		t.Fatalf("/readyz with an upstream that cannot start: %d %s", code, body)
	}
}
