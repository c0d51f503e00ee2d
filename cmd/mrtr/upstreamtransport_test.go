package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
)

// TestUpstreamTransportUsed: the flag reaches the proxy. Go's transport
// asks for gzip on a request that did not (Accept-Encoding); the lean one
// sends the request as it came.
func TestUpstreamTransportUsed(t *testing.T) {
	encodings := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "tools/list") { // not the proxy's own check at start
			encodings <- r.Header.Get("Accept-Encoding")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	}))
	defer up.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, c := range []struct{ flag, want string }{{"std", "gzip"}, {"lean", ""}} {
		if c.flag == "lean" && !mrtrproxy.LeanTransportSupported {
			continue
		}
		url, _ := startProxyCmd(t, "--upstream", up.URL, "--upstream-era", "modern", "--upstream-transport", c.flag)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := <-encodings; got != c.want {
			t.Errorf("--upstream-transport %s: the upstream got Accept-Encoding %q, want %q", c.flag, got, c.want)
		}
	}
}
