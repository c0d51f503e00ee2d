package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// legacyHTTPServer is go-sdk's Streamable HTTP server in stateful mode: a
// 2025-11-25 server over HTTP (its DiscoverResult lists only older
// versions, and it refuses modern calls). Its tool asks for input the
// legacy way, mid-call.
func legacyHTTPServer(t *testing.T) string {
	srv := httptest.NewServer(legacyHTTPHandler())
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// legacyHTTPHandler is legacyHTTPServer's handler.
func legacyHTTPHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "http-legacy", Version: "1"}, nil)
	type item struct {
		Item string `json:"item"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delete"}, func(ctx context.Context, req *mcp.CallToolRequest, in item) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete " + in.Item + "?", RequestedSchema: &jsonschema.Schema{
			Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		if res.Action != "accept" || res.Content["ok"] != true {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + in.Item}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Item}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// TestProxyHTTPLegacyUpstream: `mrtr proxy --upstream URL` tells a
// 2025-11-25 HTTP upstream by the spec's era detection and bridges it: a
// mid-call elicitation becomes a sealed round, the retry completes it, a
// replay is refused. --upstream-era legacy, once refused for HTTP, forces
// the bridge.
func TestProxyHTTPLegacyUpstream(t *testing.T) {
	for _, era := range []string{"auto", "legacy"} {
		t.Run(era, func(t *testing.T) {
			up := legacyHTTPServer(t)
			url, logs := startProxyCmd(t, "--upstream", up, "--upstream-era", era)
			if !strings.Contains(logs.String(), "the upstream speaks 2025-11-25") {
				t.Fatalf("no startup line naming the legacy era:\n%s", logs.String())
			}
			tok, key := pauseDelete(t, url, "a")
			if got := resumeDelete(t, url, "a", tok, key); !strings.Contains(got, "deleted a") {
				t.Fatalf("resume: %s", got)
			}
			answers := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
			_, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}, "requestState": tok, "inputResponses": answers})
			if e == nil || !strings.Contains(string(e["data"]), "replayed") {
				t.Fatalf("replay: %v", e)
			}
		})
	}
}

// TestProbeHTTP: the era of an HTTP upstream from its answer to a modern
// server/discover, as the spec's client era detection reads it.
func TestProbeHTTP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"DiscoverResult", 200, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}`, proxy.EraModern},
		{"DiscoverResult of older versions only", 200, `{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25"]}}`, proxy.EraLegacy},
		{"header mismatch", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m"}}`, proxy.EraModern},
		{"missing capability", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m"}}`, proxy.EraModern},
		{"unsupported version", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28","2027-01-01"]}}}`, proxy.EraModern},
		{"unsupported version, older ones named", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2025-11-25"]}}}`, proxy.EraLegacy},
		{"method not found, 404", 404, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, proxy.EraModern},
		{"method not found, 400", 400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, proxy.EraLegacy},
		{"not initialized (TypeScript SDK 1.x)", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, proxy.EraLegacy},
		{"plain text", 400, `Bad Request: No valid session ID provided`, proxy.EraLegacy},
		{"server error", 500, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, ""},
		{"unauthorized", 401, `{"error":"invalid_token"}`, ""},
		{"forbidden", 403, `forbidden`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") != "server/discover" {
					t.Errorf("probe headers %v", r.Header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			era, err := proxy.ProbeHTTP(context.Background(), http.DefaultTransport, srv.URL+"/mcp")
			if tc.want == "" { // the answer tells nothing: the proxy warns and takes it as modern
				if err == nil {
					t.Fatalf("era %q, want an error", era)
				}
				return
			}
			if err != nil || era != tc.want {
				t.Fatalf("era %q (%v), want %q", era, err, tc.want)
			}
		})
	}
}
