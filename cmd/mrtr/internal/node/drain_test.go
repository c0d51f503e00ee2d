package node

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// TestDrainCounted (issue 35): a drain waits for every POST (a call, a
// resume) and DELETE, never for the listen streams a client keeps open
// (a GET, a subscriptions/listen POST), which end only when it goes.
func TestDrainCounted(t *testing.T) {
	for _, tc := range []struct {
		method, mcpMethod string
		want              bool
	}{
		{http.MethodPost, "tools/call", true},
		{http.MethodPost, "", true},
		{http.MethodPost, "subscriptions/listen", false},
		{http.MethodDelete, "", true},
		{http.MethodGet, "", false},
	} {
		r, _ := http.NewRequest(tc.method, "http://127.0.0.1/mcp", nil)
		if tc.mcpMethod != "" {
			r.Header.Set("Mcp-Method", tc.mcpMethod)
		}
		if got := counted(r); got != tc.want {
			t.Errorf("%s with Mcp-Method %q: counted %v, want %v", tc.method, tc.mcpMethod, got, tc.want)
		}
	}
}

// TestDrainWrapCounts: wrap counts a DELETE in flight while it runs, and a
// subscriptions/listen POST not at all.
func TestDrainWrapCounts(t *testing.T) {
	var c DrainConfig
	var seen int
	h := c.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { _, seen = c.Counts() }))
	for _, tc := range []struct {
		method, mcpMethod string
		want              int
	}{
		{http.MethodDelete, "", 1},
		{http.MethodPost, "subscriptions/listen", 0},
		{http.MethodPost, "tools/call", 1},
	} {
		r, _ := http.NewRequest(tc.method, "http://127.0.0.1/mcp", nil)
		r.Header.Set("Mcp-Method", tc.mcpMethod)
		h.ServeHTTP(nil, r)
		if seen != tc.want {
			t.Errorf("%s %q: %d in flight while it runs, want %d", tc.method, tc.mcpMethod, seen, tc.want)
		}
		if _, n := c.Counts(); n != 0 {
			t.Errorf("%s %q: %d in flight after it ended", tc.method, tc.mcpMethod, n)
		}
	}
}

// TestDrainForcedStopsUpstreamAtOnce (issue 35): after a forced drain (a
// second signal, an expired --drain-timeout) the upstream's processes get
// no grace: the stop's context is already done; after a clean drain they
// get their grace.
func TestDrainForcedStopsUpstreamAtOnce(t *testing.T) {
	var c DrainConfig
	ctx, cancel := c.UpstreamStopContext(time.Hour)
	if ctx.Err() != nil {
		t.Fatalf("a clean stop gives the upstream no grace: %v", ctx.Err())
	}
	cancel()
	c.forced.Store(true)
	ctx, cancel = c.UpstreamStopContext(time.Hour)
	defer cancel()
	if ctx.Err() == nil {
		t.Fatal("after a forced drain the upstream's stop still waits up to its grace, want it killed at once")
	}
	// A drain cut short by its timeout forces.
	d := DrainConfig{Held: func() int { return 1 }}
	if d.Drain(context.Background(), slog.New(slog.DiscardHandler)) || !d.forced.Load() {
		t.Fatal("a drain cut short by --drain-timeout 0 did not count as forced")
	}
}
