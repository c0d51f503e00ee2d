package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// upstreamStreak is how many upstream failures in a row are logged at
// warn level (each one is logged at debug level).
const upstreamStreak = 3

// UpstreamStatusError is an upstream that answered a probe
// ([Handler.CheckUpstream]) with an HTTP status that says it cannot serve
// MCP at the URL: 404 (the wrong path) or a 5xx.
type UpstreamStatusError struct {
	Status int
}

func (e *UpstreamStatusError) Error() string {
	if e.Status == http.StatusNotFound {
		return "the upstream answered HTTP 404 Not Found: is the URL's path its MCP endpoint (often /mcp)?"
	}
	return fmt.Sprintf("the upstream answered HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// CheckUpstream asks the upstream whether it serves MCP at the URL, with
// a JSON-RPC ping that has no effect in either protocol era: a modern
// server answers it, a 2025-11-25 one refuses it for want of a session,
// both with a status that is no failure. It returns the transport's error
// when the upstream cannot be reached, an [*UpstreamStatusError] for 404
// or a 5xx, and nil otherwise. It is safe for concurrent use, and counts
// towards the failures in a row that are logged at warn.
func (h *Handler) CheckUpstream(ctx context.Context) error {
	body := `{"jsonrpc":"2.0","id":"mrtr-proxy-check","method":"ping"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.up.String(), strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("proxy: check the upstream: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "ping")
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("proxy: reach the upstream: %w", err)
	}
	resp.Body.Close()
	if upstreamFailed(req, resp.StatusCode) {
		return &UpstreamStatusError{Status: resp.StatusCode}
	}
	return nil
}

// upstreamFailed reports whether status says the upstream cannot serve
// MCP at the URL: a 5xx, or a 404 to a request outside any session (a
// 404 to one with Mcp-Session-Id is the protocol's "session expired").
func upstreamFailed(r *http.Request, status int) bool {
	return status >= 500 || (status == http.StatusNotFound && r.Header.Get("Mcp-Session-Id") == "")
}

// watchedTransport logs the upstream's failures for every request that
// goes through the proxy, pausable or not: each at debug level, and a
// run of upstreamStreak in a row once at warn, until the upstream
// answers again.
type watchedTransport struct {
	next http.RoundTripper
	log  *slog.Logger
	url  string // redacted

	mu     sync.Mutex
	failed int  // failures in a row
	warned bool // the current run was logged at warn
}

func (t *watchedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	ctx := r.Context()
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled):
		// The client left: says nothing about the upstream.
	case err != nil:
		t.log.DebugContext(ctx, "proxy: upstream request failed", "http_method", r.Method, "mcp_method", r.Header.Get("Mcp-Method"), "error", err)
		t.failure(ctx, err.Error())
	case resp.StatusCode >= 400:
		t.log.DebugContext(ctx, "proxy: upstream answered an HTTP error", "http_method", r.Method, "mcp_method", r.Header.Get("Mcp-Method"), "status", resp.StatusCode)
		if upstreamFailed(r, resp.StatusCode) {
			t.failure(ctx, (&UpstreamStatusError{Status: resp.StatusCode}).Error())
		} else {
			t.success(ctx)
		}
	default:
		t.success(ctx)
	}
	return resp, err
}

func (t *watchedTransport) failure(ctx context.Context, why string) {
	t.mu.Lock()
	t.failed++
	n, warn := t.failed, t.failed >= upstreamStreak && !t.warned
	if warn {
		t.warned = true
	}
	t.mu.Unlock()
	if warn {
		t.log.WarnContext(ctx, "proxy: the upstream failed several requests in a row; check --upstream and that it runs",
			"upstream", t.url, "failures", n, "last", why)
	}
}

func (t *watchedTransport) success(ctx context.Context) {
	t.mu.Lock()
	warned, n := t.warned, t.failed
	t.failed, t.warned = 0, false
	t.mu.Unlock()
	if warned {
		t.log.InfoContext(ctx, "proxy: the upstream answers again", "upstream", t.url, "after_failures", n)
	}
}
