package bridge_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/internal/bridge"
)

// greet pauses oldServer's greet tool (it elicits) as a 2026-07-28 call
// of user ("" anonymous) declaring elicitation, and returns the answer:
// input_required with a sealed state, or an error.
func (e *evictEnv) greet(user string) []byte {
	h := http.Header{}
	if user != "" {
		h.Set("X-Test-User", user)
	}
	_, body := postHdr(e.px, h, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "greet", "arguments": map[string]any{}, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}})
	return body
}

func paused(body []byte) bool { return bytes.Contains(body, []byte(`"input_required"`)) }

// limitWarnings returns the suppressed counts of the warnings about
// refusals at limit.
func (w *warnLog) limitWarnings(limit string) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for _, r := range w.recs {
		var l string
		n := int64(-1)
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "limit":
				l = a.Value.String()
			case "suppressed":
				n = a.Value.Int64()
			}
			return true
		})
		if l == limit {
			out = append(out, n)
		}
	}
	return out
}

// TestPerCallerBound (issue 28, item 4): one caller cannot take every
// --max-procs slot. At --max-procs-per-caller 2 of 4, alice's third held
// call is refused, naming the limit, while bob still gets sessions; the
// refusals of a burst are warned of once, and counted.
func TestPerCallerBound(t *testing.T) {
	w := &warnLog{}
	e := newEvictEnv(t, bridge.Options{MaxSessions: 4, MaxSessionsPerCaller: 2, Logger: slog.New(w)})
	for i := range 2 {
		if body := e.greet("alice"); !paused(body) {
			t.Fatalf("alice's call %d: %s", i, body)
		}
	}
	for i := range 5 {
		body := e.greet("alice")
		if paused(body) || !strings.Contains(string(body), "--max-procs-per-caller") {
			t.Fatalf("alice's call beyond her bound (%d): %s", i, body)
		}
	}
	for i := range 2 {
		if body := e.greet("bob"); !paused(body) {
			t.Fatalf("bob's call %d, alice at her bound: %s", i, body)
		}
	}
	if got := w.limitWarnings("--max-procs-per-caller"); len(got) != 1 || got[0] != 0 {
		t.Fatalf("five refusals at once: warnings with suppressed %v, want [0]", got)
	}
	st := e.b.Stats()
	if st.Refused.PerCaller != 5 || st.Refused.Procs != 0 || st.Holds != 4 || st.Sessions != 4 {
		t.Fatalf("stats %+v, want 5 refused per caller, 4 held", st)
	}
	// At --max-procs now: a third caller is refused at that limit.
	if body := e.greet("carol"); paused(body) || !strings.Contains(string(body), "--max-procs)") {
		t.Fatalf("carol at --max-procs: %s", body)
	}
	if st := e.b.Stats(); st.Refused.Procs != 1 {
		t.Fatalf("stats %+v, want 1 refused at --max-procs", st)
	}
}

// TestPerCallerEvictsOwnIdle (issue 28, item 4): at its bound, a
// caller's call stops the least recently used idle session of that caller
// (here a 2025-11-25 client session of the anonymous callers) rather than
// be refused, and never one of another caller's.
func TestPerCallerEvictsOwnIdle(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 4, MaxSessionsPerCaller: 2})
	if body := e.modern("bob"); !bytes.Contains(body, []byte(`"1"`)) { // child 0, bob's, idle
		t.Fatalf("bob: %s", body)
	}
	a, b := rawInit(t, e.px), rawInit(t, e.px) // children 1 and 2, anonymous
	if e.use(t, a) != http.StatusOK {          // b is the least recently used now
		t.Fatal("tools/list on a")
	}
	if body := e.greet(""); !paused(body) { // child 3, in place of b's
		t.Fatalf("an anonymous call at its bound, with two idle sessions: %s", body)
	}
	e.wantStopped(t, "the anonymous call", false, false, true, false)
	if s := e.use(t, b); s != http.StatusNotFound {
		t.Fatalf("the evicted session: %d, want 404", s)
	}
	// a is in use by nobody, the held call is not idle: the next
	// anonymous call evicts a, then the one after is refused.
	if body := e.greet(""); !paused(body) {
		t.Fatalf("the second anonymous call: %s", body)
	}
	e.wantStopped(t, "the second anonymous call", false, true, true, false, false)
	if body := e.greet(""); paused(body) || !strings.Contains(string(body), "--max-procs-per-caller") {
		t.Fatalf("an anonymous call with both held: %s", body)
	}
	if body := e.modern("bob"); !bytes.Contains(body, []byte(`"2"`)) { // bob's own session, reused
		t.Fatalf("bob again: %s", body)
	}
}

// TestPerCallerDirect (issue 28, item 4): in front of a modern upstream,
// the children of one caller's 2025-11-25 client sessions are bounded
// too: at its bound a caller's initialize ends its own idle session,
// never another caller's.
func TestPerCallerDirect(t *testing.T) {
	kids := &children{srv: oldServer(nil)}
	d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, MaxProcs: 4, MaxProcsPerCaller: 1})
	t.Cleanup(func() { d.Close(t.Context()) })
	px := serveProxy(t, d)
	a := rawInit(t, px)
	b := rawInit(t, px) // in place of a
	if s, _ := rawPost(t, px, a, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}); s != http.StatusNotFound {
		t.Fatalf("the caller's first session after its second initialize: %d, want 404", s)
	}
	if s, _ := rawPost(t, px, b, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}); s != http.StatusOK {
		t.Fatalf("the caller's second session: %d", s)
	}
	if st := d.Stats(); st.Sessions != 1 {
		t.Fatalf("stats %+v, want 1 child", st)
	}
}
