package e2e

import "testing"

// TestProxyStdioConformance2025: go-sdk's everything-server v1.8.0 as a
// command upstream (`mrtr proxy -- everything-server`, stdio, no -http)
// passes the 2025-11-25 requirements through the proxy: each session of
// the harness gets a child of its own (initialize, Mcp-Session-Id, GET
// stream, DELETE, 404 afterwards), as the same server does over HTTP.
func TestProxyStdioConformance2025(t *testing.T) {
	needHarness(t)
	bin := needEverything(t)
	t.Parallel()
	url := startProxy(t, "--", bin)
	r := runHarness(t, url, nil, "req-2025")
	r.mustPass(t)
	r.mustHaveRun(t, "req-2025-stdio")
}
