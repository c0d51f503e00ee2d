package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
)

// TestListenURL: the logged URL keeps the host --addr gave (a container's
// 0.0.0.0:8080 is not logged as [::]:8080) with the port the listener got.
func TestListenURL(t *testing.T) {
	for _, c := range []struct{ given, listen, want string }{
		{"0.0.0.0:0", "0.0.0.0:0", "http://0.0.0.0:PORT/mcp"},
		{"127.0.0.1:0", "127.0.0.1:0", "http://127.0.0.1:PORT/mcp"},
		{"localhost:0", "127.0.0.1:0", "http://localhost:PORT/mcp"},
		{":0", ":0", "http://[::]:PORT/mcp"},
	} {
		ln, err := net.Listen("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		want := strings.Replace(c.want, "PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), 1)
		if got := node.ListenURL(c.given, ln.Addr(), "/mcp"); got != want {
			t.Errorf("--addr %s (bound %s): %s, want %s", c.given, ln.Addr(), got, want)
		}
	}
	if got := node.ListenURL("[::1]:9", &net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "/metrics"); got != "http://[::1]:9/metrics" {
		t.Errorf("[::1]:9: %s", got)
	}
}

// TestServeLogsAddrAsGiven: the "mrtr serving" line names the host as
// --addr gave it.
func TestServeLogsAddrAsGiven(t *testing.T) {
	url, _ := startServe(t, "--addr", "localhost:0")
	if !strings.HasPrefix(url, "http://localhost:") || !strings.HasSuffix(url, "/mcp") {
		t.Errorf("mrtr serving url=%s, want http://localhost:PORT/mcp", url)
	}
}
