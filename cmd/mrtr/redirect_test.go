package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// startRedirect serves, on two 127.0.0.1 listeners, a first server that
// answers every request with a 307 to the second, and the second, which
// counts what reaches it.
func startRedirect(t *testing.T) (from, to string, reached *atomic.Int32) {
	t.Helper()
	reached = new(atomic.Int32)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "not here", http.StatusTeapot)
	}))
	t.Cleanup(second.Close)
	to = second.URL + "/mcp"
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to+"?x=\u202e1") // a bidi override: net/http refuses controls in a header
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)
	return first.URL + "/mcp", to, reached
}

// TestProbeFollowsNoRedirect pins issue 27 item 8: mrtr probe sends
// nothing to where a redirect points (net/http would re-POST there with
// the bearer token: same host, another port); it reports the redirect,
// status and Location cleaned, and exits 1.
func TestProbeFollowsNoRedirect(t *testing.T) {
	from, to, reached := startRedirect(t)
	code, out, errs := runProbeCmd(t, from, "--bearer", "probe-secret")
	if code != 1 || !strings.Contains(errs, "HTTP 307, to "+to+"?x=1)") || strings.Contains(errs, "\u202e") {
		t.Errorf("exit %d, want 1 and the redirect reported:\n%s%s", code, out, errs)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// TestCallFollowsNoRedirect: mrtr call neither follows a redirect (with
// or without its bearer token) but says where it pointed.
func TestCallFollowsNoRedirect(t *testing.T) {
	from, to, reached := startRedirect(t)
	for _, args := range [][]string{{from, "kinds", "--bearer", "call-secret"}, {from}, {from, "--legacy", "kinds"}} {
		_, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, args...)
		if err == nil || !strings.Contains(err.Error(), "307 Temporary Redirect for "+from+", to "+to+"?x=1: mrtr call follows no redirects") ||
			strings.Contains(err.Error(), "\u202e") {
			t.Errorf("%q: %v (stderr %q), want the redirect reported", args, err, errOut)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}
