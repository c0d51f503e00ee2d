package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
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
	h := c.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { _, seen = c.counts() }))
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
		if _, n := c.counts(); n != 0 {
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
	if d.drain(context.Background(), slog.New(slog.DiscardHandler)) || !d.forced.Load() {
		t.Fatal("a drain cut short by --drain-timeout 0 did not count as forced")
	}
}

// TestDrainProgressNamesFlows (issue 39, item 6): the drain's progress
// record ("mrtr draining", its text unchanged) names the flows held and
// the requests in flight; once nothing is left it names none.
func TestDrainProgressNamesFlows(t *testing.T) {
	flows := NewFlowTracker()
	var held atomic.Int64
	c := &DrainConfig{timeout: time.Hour, Flows: flows, logEvery: time.Nanosecond, Held: func() int { return int(held.Load()) }}
	flowID := pausedFlow(t, flows)
	held.Store(1)
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	r.Header.Set("Mcp-Method", "prompts/get")
	r.Header.Set("Mcp-Name", "greet")
	var logs testcmd.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	done := make(chan bool, 1)
	release := make(chan struct{})
	h := c.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	go h.ServeHTTP(nil, r)
	for _, n := c.counts(); n == 0; _, n = c.counts() {
		time.Sleep(time.Millisecond)
	}
	go func() { done <- c.drain(context.Background(), log) }()
	for len(testcmd.Records(logs.String(), "mrtr draining")) < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	held.Store(0)
	if !<-done {
		t.Fatalf("the drain did not end once nothing was left:\n%s", logs.String())
	}
	recs := testcmd.Records(logs.String(), "mrtr draining")
	var got []flowRef
	json.Unmarshal(recs[1]["waiting_for"], &got)
	want := []flowRef{{Flow: flowID, Method: "tools/call", Target: "delete", State: "held", Round: 1}, {Method: "prompts/get", Target: "greet", State: "in_flight"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("the progress record waits for %s, want %+v", recs[1]["waiting_for"], want)
	}
	if text, _ := flowList(got).MarshalText(); string(text) != "flow "+flowID+" tools/call delete (held); prompts/get greet (in_flight)" {
		t.Errorf("in the text format: %q", text)
	}
}

// TestFlowTrackerForgetsExpired: a held flow is named only while its
// token (and so the bridge's hold) lives; a resumed one that answers is
// forgotten.
func TestFlowTrackerForgetsExpired(t *testing.T) {
	flows := NewFlowTracker()
	flows.SetTTL(mrtr.Options{TTL: time.Minute, AnonymousTTL: time.Minute})
	pausedFlow(t, flows)
	if l := flows.list(time.Now()); len(l) != 1 || l[0].State != "held" {
		t.Fatalf("just paused: %+v, want one held flow", l)
	}
	if l := flows.list(time.Now().Add(2 * time.Minute)); len(l) != 0 {
		t.Fatalf("after its token's TTL: %+v, want none", l)
	}
}

// TestFlowTrackerBounded: pauses abandoned between drains do not pile up:
// once the tracker holds minPrune flows, those whose token expired go.
func TestFlowTrackerBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flows := NewFlowTracker()
		flows.SetTTL(mrtr.Options{TTL: time.Minute, AnonymousTTL: time.Minute})
		ring, err := reqstate.GenerateKeyRing("k1", nil)
		if err != nil {
			t.Fatal(err)
		}
		g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Observer: flows})
		old := pauseWith(t, g)
		time.Sleep(2 * time.Minute)
		for range minPrune {
			pauseWith(t, g)
		}
		flows.mu.Lock()
		n, kept := len(flows.flows), flows.flows[old].Flow != ""
		flows.mu.Unlock()
		if kept || n != minPrune {
			t.Fatalf("%d flows tracked, the expired one kept: %v; want %d, it gone", n, kept, minPrune)
		}
	})
}

// pausedFlow pauses a tools/call of delete through a guard that reports
// to obs, and returns its flow id.
func pausedFlow(t *testing.T, obs mrtr.Observer) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return pauseWith(t, mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Observer: obs}))
}

// pauseWith pauses a tools/call of delete through g and returns its flow
// id.
func pauseWith(t *testing.T, g *mrtr.Guard) string {
	t.Helper()
	f, err := g.Begin(t.Context(), &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "delete", Arguments: json.RawMessage(`{"item":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pause(nil, "confirm"); err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), nil)
	return f.ID()
}
