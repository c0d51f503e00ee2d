package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// spoofed are forwarding headers a client may send to pass for someone
// else before an upstream that trusts them.
var spoofed = http.Header{
	"X-Forwarded-For":   {"203.0.113.9"},
	"X-Forwarded-Host":  {"admin.example"},
	"X-Forwarded-Proto": {"https"},
	"X-Forwarded-Port":  {"443"},
	"Forwarded":         {"for=203.0.113.9;host=admin.example;proto=https"},
	"X-Real-Ip":         {"203.0.113.9"},
}

// TestForwardedHeaders: one rule on every path to the upstream (a paused
// call, its rebuilt resume, a passed-through POST, a GET): what the
// client sent as Forwarded, X-Forwarded-* or X-Real-Ip never arrives, and
// X-Forwarded-For, -Host and -Proto are the proxy's, from the connection.
func TestForwardedHeaders(t *testing.T) {
	up := newUpstream(t)
	var mu sync.Mutex
	var getHeader http.Header
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		getHeader = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/", up.srv.Config.Handler)
	both := httptest.NewServer(mux)
	t.Cleanup(both.Close)
	px := startProxy(t, both.URL+"/mcp", nil, nil, nil)
	pxHost := strings.TrimPrefix(px.URL, "http://")

	r := post(t, px.URL, callReq{name: "ask", header: spoofed})
	post(t, px.URL, callReq{id: 2, name: "ask", state: ptr(r.state()), responses: confirmed(), header: spoofed})
	req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`))
	req.Header = spoofed.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, px.URL, nil)
	req.Header = spoofed.Clone()
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	check := func(what string, hd http.Header) {
		t.Helper()
		want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": pxHost, "X-Forwarded-Proto": "http"}
		for k, v := range want {
			if got := hd.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: upstream got %s %q, want %q", what, k, got, v)
			}
		}
		for _, k := range []string{"Forwarded", "X-Forwarded-Port", "X-Real-Ip"} {
			if v := hd.Values(k); len(v) != 0 {
				t.Errorf("%s: the client's %s %q reached the upstream", what, k, v)
			}
		}
	}
	got := up.all()
	if len(got) != 3 || len(up.resumes()) != 1 {
		t.Fatalf("upstream saw %d POSTs (%d resumes), want 3 (1)", len(got), len(up.resumes()))
	}
	for i, what := range []string{"paused tools/call", "resumed tools/call", "passed-through tools/list"} {
		check(what, got[i].header)
	}
	mu.Lock()
	defer mu.Unlock()
	if getHeader == nil {
		t.Fatal("the GET did not reach the upstream")
	}
	check("GET", getHeader)
}

// TestMethods: GET, HEAD, DELETE and OPTIONS pass through without a body;
// one with a body is refused (400), and every other method gets 405 with
// an Allow header, none of them reaching the upstream.
func TestMethods(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		if n > 0 {
			reached = append(reached, r.Method+" with a body")
		} else {
			reached = append(reached, r.Method)
		}
		mu.Unlock()
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)
	px := startProxy(t, up.URL+"/mcp", nil, nil, nil)
	do := func(method string, body io.Reader) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, px.URL, body)
		if body != nil {
			// The proxy answers a refused method without reading its body;
			// with 100-continue the client does not send it either.
			req.Header.Set("Expect", "100-continue")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions} {
		if resp := do(m, nil); resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Upstream") != "yes" {
			t.Errorf("%s: status %d, want the upstream's 204", m, resp.StatusCode)
		}
		if resp := do(m, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy"}}`)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with a body: status %d, want 400", m, resp.StatusCode)
		}
	}
	big := strings.NewReader(strings.Repeat("x", 5<<20))
	for _, tc := range []struct {
		method string
		body   io.Reader
	}{
		{http.MethodPut, big},
		{http.MethodPatch, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy"}}`)},
		{"PROPFIND", nil},
		{http.MethodTrace, nil},
	} {
		resp := do(tc.method, tc.body)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST, DELETE, OPTIONS" {
			t.Errorf("%s: status %d, Allow %q; want 405 with the allowed methods", tc.method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "GET HEAD DELETE OPTIONS"; strings.Join(reached, " ") != want {
		t.Fatalf("the upstream saw %q, want %q (no body, no other method)", reached, want)
	}
}
