package main

import (
	"strings"
	"testing"
)

// TestServeLogsAddrAsGiven: the "mrtr serving" line names the host as
// --addr gave it.
func TestServeLogsAddrAsGiven(t *testing.T) {
	url, _ := startServe(t, "--addr", "localhost:0")
	if !strings.HasPrefix(url, "http://localhost:") || !strings.HasSuffix(url, "/mcp") {
		t.Errorf("mrtr serving url=%s, want http://localhost:PORT/mcp", url)
	}
}
