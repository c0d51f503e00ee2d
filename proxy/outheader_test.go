package proxy_test

import (
	"net/http"
	"slices"
	"testing"
)

// TestPausableHeaders pins the header a pausable call's request carries
// to the upstream (built in one pass, not cloned): the client's fields,
// repeated values in order, without hop-by-hop fields, those the
// Connection header names, Accept-Encoding or Authorization, and with the
// proxy's own Content-Type and forwarding headers.
func TestPausableHeaders(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) { writeResult(w, m.ID, complete("ok")) })
	px := startProxy(t, up.url(), nil, nil, nil)
	hd := http.Header{
		"Connection":     {"X-Hop-Named"},
		"X-Hop-Named":    {"1"},
		"Keep-Alive":     {"timeout=5"},
		"Te":             {"trailers"},
		"Authorization":  {"Bearer secret"},
		"X-Many":         {"a", "b"},
		"Forwarded":      {"for=203.0.113.9"},
		"Content-Type":   {"application/json; charset=utf-8"},
		"Accept-Charset": {"utf-8"},
	}
	if r := send(t, px.URL, rpcBody(1, "tools/call", `"name":"ask"`), hd); r.err != nil {
		t.Fatalf("call: %s", r.raw)
	}
	got := up.received()[0].header
	for _, k := range []string{"X-Hop-Named", "Keep-Alive", "Te", "Authorization", "Forwarded"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s reached the upstream: %q", k, v)
		}
	}
	if v := got["X-Many"]; !slices.Equal(v, []string{"a", "b"}) {
		t.Errorf("X-Many = %q, want [a b]", v)
	}
	if v := got["Content-Type"]; !slices.Equal(v, []string{"application/json"}) {
		t.Errorf("Content-Type = %q", v)
	}
	if got.Get("Accept-Charset") != "utf-8" || got.Get("X-Forwarded-For") != "127.0.0.1" || got.Get("X-Forwarded-Proto") != "http" || got.Get("X-Forwarded-Host") == "" {
		t.Errorf("upstream header %v", got)
	}
}
