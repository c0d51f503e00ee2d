package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestProxyBridgeMissingMeta (issue 39, item 5): a 2026-07-28 request
// (the header says so) without the _meta protocol version, through the
// bridge, is told that field is missing (-32602), not that its version is
// unsupported.
func TestProxyBridgeMissingMeta(t *testing.T) {
	p := startDrainedProxy(t, "--upstream", legacyHTTPServer(t))
	post := func(version string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Method", "tools/list")
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	status, body := post("2026-07-28")
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, `missing _meta field io.modelcontextprotocol/protocolVersion`) || strings.Contains(body, "unsupported protocol version") {
		t.Errorf("header 2026-07-28, no _meta: %d %s, want 400 -32602 naming the missing _meta field", status, body)
	}
}
