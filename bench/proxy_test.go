package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestProxyContenders: every contender of BenchmarkProxy completes the
// flow, so the benchmark compares like with like.
func TestProxyContenders(t *testing.T) {
	up := httptest.NewServer(leanUpstream())
	defer up.Close()
	for _, ct := range proxyContenders(up.URL + "/mcp") {
		target := up.URL + "/mcp"
		if ct.Handler != nil {
			px := httptest.NewServer(ct.Handler)
			defer px.Close()
			target = px.URL + "/mcp"
		}
		for range 3 {
			if err := proxyFlow(&http.Client{}, target); err != nil {
				t.Fatalf("%s: %v", ct.Name, err)
			}
		}
	}
}
