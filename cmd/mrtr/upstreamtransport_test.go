package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
)

// TestUpstreamTransportFlag pins issue 27 item 2's switch:
// --upstream-transport (MRTR_UPSTREAM_TRANSPORT) is std or lean, lean by
// default where the proxy package can run it and std elsewhere, and lean
// where it cannot run is an error at start.
func TestUpstreamTransportFlag(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*proxy.ProxyConfig, error) {
		a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
		return proxy.ParseProxy(a, append([]string{"--upstream", "http://127.0.0.1:1/mcp"}, args...))
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "std"
	if mrtrproxy.LeanTransportSupported {
		want = "lean"
	}
	if c.UpTransport != want {
		t.Fatalf("default --upstream-transport %q, want %q", c.UpTransport, want)
	}
	if c, err := parse(nil, "--upstream-transport", "std"); err != nil || c.UpTransport != "std" {
		t.Fatalf("--upstream-transport std: %v", err)
	}
	if c, err := parse(map[string]string{"MRTR_UPSTREAM_TRANSPORT": "std"}); err != nil || c.UpTransport != "std" {
		t.Fatalf("MRTR_UPSTREAM_TRANSPORT=std: %v", err)
	}
	if _, err := parse(nil, "--upstream-transport", "fast"); err == nil || !strings.Contains(err.Error(), "--upstream-transport") {
		t.Fatalf("--upstream-transport fast: %v", err)
	}
	_, err = parse(nil, "--upstream-transport", "lean")
	if mrtrproxy.LeanTransportSupported != (err == nil) {
		t.Fatalf("--upstream-transport lean (supported %v): %v", mrtrproxy.LeanTransportSupported, err)
	}
	if err != nil && !strings.Contains(err.Error(), "use std") {
		t.Fatalf("--upstream-transport lean where unsupported: %q names no way out", err)
	}
}

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
