package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
