package bridge_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// evictEnv is the proxy, with a Bridge bounded to max sessions as its
// transport, in front of oldServer children; callers are named by the
// X-Test-User header (none: anonymous).
type evictEnv struct {
	px      string
	b       *bridge.Bridge
	kids    *children
	entered chan struct{} // a call of the wait tool began
}

func newEvictEnv(t *testing.T, o bridge.Options) *evictEnv {
	t.Helper()
	e := &evictEnv{entered: make(chan struct{}, 4)}
	e.kids = &children{srv: oldServer(e.entered)}
	o.Dial = e.kids.dial
	e.b = bridge.New(o)
	t.Cleanup(func() { e.b.Close(context.Background()) })
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{Upstream: "http://stdio.upstream/mcp", Transport: e.b,
		Guard:     mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}),
		Principal: testPrincipal})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.px = srv.URL + "/mcp"
	return e
}

// modern runs oldServer's count tool as a 2026-07-28 call of user (a
// bridged call, on a session of that caller's) and returns the answer.
func (e *evictEnv) modern(user string) []byte {
	_, body := postHdr(e.px, http.Header{"X-Test-User": {user}}, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
		"name": "count", "arguments": map[string]any{}, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	return body
}

// use sends tools/list on a 2025-11-25 session and returns the status.
func (e *evictEnv) use(t *testing.T, id string) int {
	t.Helper()
	status, _ := rawPost(t, e.px, id, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
	return status
}

// stopped reports which of the children started so far were stopped.
func (e *evictEnv) stopped() []bool {
	var out []bool
	for _, k := range e.kids.list() {
		select {
		case <-k.closed:
			out = append(out, true)
		default:
			out = append(out, false)
		}
	}
	return out
}

func (e *evictEnv) wantStopped(t *testing.T, step string, want ...bool) {
	t.Helper()
	got := e.stopped()
	if len(got) != len(want) {
		t.Fatalf("%s: %d children started, want %d", step, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: children stopped %v, want %v", step, got, want)
		}
	}
}

// TestModernCallEvictsLegacySession (issue 27, item 5): two bare
// 2025-11-25 initializes at --max-procs 2 no longer lock 2026-07-28
// callers out: the call evicts the least recently used idle client
// session (its id is 404 afterwards: initialize again), not the other.
func TestModernCallEvictsLegacySession(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 2})
	a, b := rawInit(t, e.px), rawInit(t, e.px)
	if e.use(t, a) != http.StatusOK { // b is the least recently used now
		t.Fatal("tools/list on a")
	}
	if body := e.modern("alice"); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("a 2026-07-28 call at the bound with two idle client sessions: %s", body)
	}
	e.wantStopped(t, "the call", false, true, false)
	if s := e.use(t, b); s != http.StatusNotFound {
		t.Fatalf("the evicted session: %d, want 404", s)
	}
	if s := e.use(t, a); s != http.StatusOK {
		t.Fatalf("the session used last: %d, want 200", s)
	}
}

// TestEvictLRUAcrossPools (issue 27, item 5; the mutation audit's "LRU
// eviction picking the most recent"): at the bound, a 2026-07-28 call and
// a 2025-11-25 initialize alike evict the least recently used idle
// session of either pool, the bridge's or the 2025-11-25 clients'.
func TestEvictLRUAcrossPools(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 2})
	if body := e.modern("alice"); !bytes.Contains(body, []byte(`"1"`)) { // child 0
		t.Fatalf("alice: %s", body)
	}
	l := rawInit(t, e.px) // child 1, used after alice's
	e.use(t, l)
	if body := e.modern("bob"); !bytes.Contains(body, []byte(`"1"`)) { // child 2, in place of alice's
		t.Fatalf("bob at the bound: %s", body)
	}
	e.wantStopped(t, "bob's call", true, false, false)
	e.use(t, l) // bob's is the least recently used now
	m := rawInit(t, e.px)
	e.wantStopped(t, "an initialize", true, false, true, false)
	if s := e.use(t, l); s != http.StatusOK {
		t.Fatalf("the session used last: %d", s)
	}
	// l was used after m's initialize: m goes.
	if body := e.modern("carol"); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("carol at the bound: %s", body)
	}
	e.wantStopped(t, "carol's call", true, false, true, true, false)
	if s := e.use(t, m); s != http.StatusNotFound {
		t.Fatalf("the evicted session: %d, want 404", s)
	}
}

// TestEvictLRUBridgeSessions (issue 27, item 5): among the bridge's own
// idle sessions of different callers, the least recently used goes.
func TestEvictLRUBridgeSessions(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 2})
	for _, step := range []struct {
		user, want string
	}{{"alice", `"1"`}, {"bob", `"1"`}, {"alice", `"2"`}, {"carol", `"1"`}, {"alice", `"3"`}} {
		if body := e.modern(step.user); !bytes.Contains(body, []byte(step.want)) {
			t.Fatalf("%s: %s, want %s", step.user, body, step.want)
		}
	}
	// bob's was the least recently used when carol came; alice's child
	// counted on.
	e.wantStopped(t, "the calls", false, true, false)
}

// warnLog keeps the warnings a Bridge logs.
type warnLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.recs = append(w.recs, r.Clone())
	w.mu.Unlock()
	return nil
}
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnLog) WithGroup(string) slog.Handler      { return w }

// refusals returns the suppressed counts of the warnings about refusals
// at --max-procs.
func (w *warnLog) refusals() []int64 { return w.limitWarnings("--max-procs") }

// TestRefusalWarned (issue 27, item 5): a call refused at --max-procs is
// warned of, at most once every few seconds, and the next warning counts
// the refusals left out. 2026-07-28 calls and 2025-11-25 initializes
// count alike.
func TestRefusalWarned(t *testing.T) {
	var clock atomic.Int64
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return base.Add(time.Duration(clock.Load())) }
	w := &warnLog{}
	e := newEvictEnv(t, bridge.Options{MaxSessions: 1, Logger: slog.New(w), Now: now})
	done := make(chan struct{})
	go func() { // a call in flight on the only session until its child dies
		defer close(done)
		postHdr(e.px, http.Header{}, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{
			"name": "wait", "arguments": map[string]any{}, "_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	}()
	<-e.entered
	t.Cleanup(func() { e.kids.list()[0].Close(context.Background()); <-done })
	refuse := func(legacy bool) {
		t.Helper()
		var body []byte
		if legacy {
			_, body = rawPost(t, e.px, "", map[string]any{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "c", "version": "1"}}})
		} else {
			body = e.modern("bob")
		}
		if !strings.Contains(string(body), "--max-procs") {
			t.Fatalf("at the bound: %s", body)
		}
	}
	refuse(false)
	refuse(true)
	refuse(false)
	if got := w.refusals(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("three refusals at once: warnings with suppressed %v, want [0]", got)
	}
	clock.Add(int64(6 * time.Second))
	refuse(true)
	if got := w.refusals(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("a refusal 6 s later: warnings with suppressed %v, want [0 2]", got)
	}
}
