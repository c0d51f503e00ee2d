package bridge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Tests of issue 35's mutation audit of the pools: each pins a rule that
// a deliberate bug in pool.go, bridge.go, queue.go, roots.go or
// sessions.go (as they were before issue 36 split them) broke without
// any test failing.

// gatedScript is script whose first dial waits until open is closed.
type gatedScript struct {
	script
	open  chan struct{}
	dials atomic.Int32
}

func (g *gatedScript) dial(ctx context.Context) (Upstream, error) {
	if g.dials.Add(1) == 1 {
		<-g.open
	}
	return g.script.dial(ctx)
}

// TestWarmWaitersOnePerStart: a call waits for a warm session being
// opened only while fewer calls than are being opened wait already, and
// a call that waits is counted against its caller (so its caller's bound
// holds while it waits).
func TestWarmWaitersOnePerStart(t *testing.T) {
	g := &gatedScript{open: make(chan struct{})}
	b := New(Options{Dial: g.dial, Warm: 1})
	defer b.Close(context.Background())
	defer close(g.open)
	b.mu.Lock()
	starting := b.warmStarting
	s1, ch1 := b.takeWarmLocked("a")
	owned := b.ownedLocked("a")
	s2, ch2 := b.takeWarmLocked("b")
	b.mu.Unlock()
	if starting != 1 || s1 != nil || ch1 == nil {
		t.Fatalf("one warm start under way (%d): the first call does not wait for it", starting)
	}
	if owned != 1 {
		t.Fatalf("a call waiting for a warm session: its caller owns %d sessions, want 1", owned)
	}
	if s2 != nil || ch2 != nil {
		t.Fatal("a second call waits for the one warm start another call waits for")
	}
}

// TestRefillWaitsOutTheCrashLoop: in a crash loop, refilling the warm
// sessions starts none before the wait is over.
func TestRefillWaitsOutTheCrashLoop(t *testing.T) {
	var dials atomic.Int32
	b := New(Options{Warm: 1, CrashLoop: 1, RestartBackoff: time.Hour, MaxRestartBackoff: time.Hour, Dial: func(context.Context) (Upstream, error) {
		dials.Add(1)
		return nil, errors.New("exec: boom")
	}})
	defer b.Close(context.Background())
	eventually(t, "a crash loop", func() bool { return b.CrashLoop(context.Background()) != nil })
	b.mu.Lock()
	b.refillLocked()
	starting := b.warmStarting
	b.mu.Unlock()
	if starting != 0 || dials.Load() != 1 {
		t.Fatalf("in a crash loop's wait: %d warm starts under way, %d dials; want none after the first", starting, dials.Load())
	}
}

// TestRefillWithinMaxSessions: a warm session taken by a call is not
// replaced when the call's session fills MaxSessions.
func TestRefillWithinMaxSessions(t *testing.T) {
	sc := &script{}
	b := New(Options{Dial: sc.dial, Warm: 1, MaxSessions: 1})
	defer b.Close(context.Background())
	eventually(t, "a warm session", func() bool { return b.Stats().Warm == 1 })
	if _, err := b.acquire(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	starting, warm := b.warmStarting, len(b.idle[warmKey])
	b.mu.Unlock()
	if starting != 0 || warm != 0 {
		t.Fatalf("at MaxSessions 1 with the session taken: %d warm starts, %d warm; want none", starting, warm)
	}
}

// TestBackoff: a crash loop's wait is RestartBackoff after CrashLoop
// failures in a row, doubled with each further one, up to
// MaxRestartBackoff.
func TestBackoff(t *testing.T) {
	c := newCrashLoop(2, time.Second, 10*time.Second)
	log := slog.New(slog.DiscardHandler)
	now := time.Now()
	var got []time.Duration
	for range 8 {
		got = append(got, c.record(errors.New("boom"), now, log))
	}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	for range 40 { // far past any shift
		if d := c.record(errors.New("boom"), now, log); d != 10*time.Second {
			t.Fatalf("after %d failures: wait %v, want the cap", c.fails, d)
		}
	}
}

// TestDefaultPerCaller: a quarter of --max-procs, at least 1.
func TestDefaultPerCaller(t *testing.T) {
	for max, want := range map[int]int{1: 1, 3: 1, 4: 1, 7: 1, 8: 2, 16: 4, 17: 4} {
		if got := DefaultPerCaller(max); got != want {
			t.Errorf("DefaultPerCaller(%d) = %d, want %d", max, got, want)
		}
	}
}

// TestFifoByteBound: a queue takes a message that fills it to exactly
// its byte bound.
func TestFifoByteBound(t *testing.T) {
	q := newFifo[int](4, 10)
	if d, ok := q.push(1, 4, false); !ok || d != 0 {
		t.Fatalf("4 of 10 bytes: dropped %d, ok %v", d, ok)
	}
	if d, ok := q.push(2, 6, false); !ok || d != 0 {
		t.Fatalf("to exactly 10 of 10 bytes: dropped %d, ok %v", d, ok)
	}
	if _, ok := q.push(3, 1, false); ok {
		t.Fatal("past 10 of 10 bytes: queued")
	}
}

// TestRootsCapabilityEdits: the roots capability is declared in, or taken
// out of, an initialize's capabilities; an initialize that has no
// capabilities object keeps its body when roots are taken out, and gets
// one when they are declared.
func TestRootsCapabilityEdits(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":[]}}`,
		`{"jsonrpc":"2.0","id":1, "method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}}}}`,
	} {
		if got := withoutRootsCapability([]byte(body)); string(got) != body {
			t.Errorf("roots taken out of %s: edited to %s", body, got)
		}
		got := string(withRootsCapability([]byte(body)))
		if !strings.Contains(got, `"roots":{}`) || !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("roots declared in %s: %s", body, got)
		}
	}
}

// TestAuthorizedCallTakesNoWarmSession: a call that forwards an
// Authorization header opens a session of its own: a warm one was
// initialized without it.
func TestAuthorizedCallTakesNoWarmSession(t *testing.T) {
	sc := &script{}
	b := New(Options{Dial: sc.dial, Warm: 1})
	defer b.Close(context.Background())
	eventually(t, "a warm session", func() bool { return b.Stats().Warm == 1 })
	s, err := b.acquire(withAuthorization(context.Background(), "Bearer abc"), "a")
	if err != nil {
		t.Fatal(err)
	}
	if s.auth != "Bearer abc" {
		t.Fatal("a call forwarding an Authorization took the warm session, opened without one")
	}
	if st := b.Stats(); st.Warm != 1 {
		t.Fatalf("stats %+v: the warm session should be left", st)
	}
}

// TestWarmSessionServesInCrashLoop: a warm session ready when starts
// back off still serves a call; only a start would have to wait.
func TestWarmSessionServesInCrashLoop(t *testing.T) {
	sc := &script{}
	b := New(Options{Dial: sc.dial, Warm: 1, CrashLoop: 1, RestartBackoff: time.Hour, MaxRestartBackoff: time.Hour})
	defer b.Close(context.Background())
	eventually(t, "a warm session", func() bool { return b.Stats().Warm == 1 })
	b.mu.Lock()
	b.crash.fails, b.crash.next = b.crash.after, b.o.Now().Add(time.Hour)
	b.mu.Unlock()
	if b.CrashLoop(context.Background()) == nil {
		t.Fatal("no crash loop")
	}
	if _, err := b.acquire(context.Background(), "a"); err != nil {
		t.Fatalf("a call with a warm session ready, in a crash loop: %v", err)
	}
}

// TestEvictByCallerLeavesWarm: an eviction for one caller's bound takes
// an idle session of that caller, never a warm one (nobody's).
func TestEvictByCallerLeavesWarm(t *testing.T) {
	sc := &script{}
	b := New(Options{Dial: sc.dial, Warm: 1, MaxSessions: 4})
	defer b.Close(context.Background())
	eventually(t, "a warm session", func() bool { return b.Stats().Warm == 1 })
	s, err := b.acquire(context.Background(), "a") // the warm one
	if err != nil {
		t.Fatal(err)
	}
	b.release(s)
	eventually(t, "a warm session again", func() bool { return b.Stats().Warm == 1 })
	b.mu.Lock()
	warm := b.idle[warmKey][0]
	stop := b.evict(func(c string) bool { return c == "a" })
	_, still := b.sessions[warm]
	b.mu.Unlock()
	if stop == nil {
		t.Fatal("nothing evicted for a, which has an idle session")
	}
	_ = stop(context.Background())
	if !still || b.Stats().Warm != 1 {
		t.Fatalf("an eviction for a's bound took the warm session (stats %+v)", b.Stats())
	}
}

// directInit opens a 2025-11-25 client session of caller on d.
func directInit(t *testing.T, d *Direct, caller string) string {
	t.Helper()
	ctx := WithCaller(context.Background(), reqstate.Principal{Issuer: "test", Subject: caller})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://up/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := d.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get(sessionHeader)
	if id == "" {
		t.Fatalf("%s's initialize: %d, no session", caller, resp.StatusCode)
	}
	return id
}

// TestEvictionMovesTheSlot: a 2025-11-25 session stopped to make room for
// another caller's is no longer counted against its own caller: the slot
// is the new caller's.
func TestEvictionMovesTheSlot(t *testing.T) {
	sc := &script{}
	d := NewDirectWith(DirectOptions{Dial: sc.dial, MaxProcs: 2, MaxProcsPerCaller: 2})
	defer d.Close(context.Background())
	directInit(t, d, "alice")
	directInit(t, d, "alice")
	directInit(t, d, "bob") // in place of one of alice's
	alice, bob := key(reqstate.Principal{Issuer: "test", Subject: "alice"}), key(reqstate.Principal{Issuer: "test", Subject: "bob"})
	ss := d.legacy
	ss.mu.Lock()
	own, a, bb := ss.own, ss.ownBy[alice], ss.ownBy[bob]
	ss.mu.Unlock()
	if own != 2 || a != 1 || bb != 1 {
		t.Fatalf("after bob's session took one of alice's slots: %d in all, alice %d, bob %d; want 2, 1, 1", own, a, bb)
	}
}

// TestFreeGivesBackTheSlot: a 2025-11-25 session that ended gives its
// slot back, in all and of its caller.
func TestFreeGivesBackTheSlot(t *testing.T) {
	sc := &script{}
	d := NewDirectWith(DirectOptions{Dial: sc.dial, MaxProcs: 2, MaxProcsPerCaller: 1})
	defer d.Close(context.Background())
	for i := range 3 {
		id := directInit(t, d, "alice")
		ctx := WithCaller(context.Background(), reqstate.Principal{Issuer: "test", Subject: "alice"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://up/mcp", nil)
		req.Header.Set(sessionHeader, id)
		resp, err := d.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE %d: %d", i, resp.StatusCode)
		}
		ss := d.legacy
		ss.mu.Lock()
		own, by := ss.own, len(ss.ownBy)
		ss.mu.Unlock()
		if own != 0 || by != 0 {
			t.Fatalf("after session %d ended: %d slots taken, %d callers counted; want none", i, own, by)
		}
	}
}

// TestWarmEndedIsAFailedStart: a warm session whose upstream ends before
// any call (no caller's request reached it) failed to start: with
// CrashLoop 1 that is a crash loop, and no start follows at once.
func TestWarmEndedIsAFailedStart(t *testing.T) {
	sc := &script{}
	b := New(Options{Dial: sc.dial, Warm: 1, CrashLoop: 1, RestartBackoff: time.Hour, MaxRestartBackoff: time.Hour})
	defer b.Close(context.Background())
	started := func() int {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.started)
	}
	eventually(t, "a warm session", func() bool { return b.Stats().Warm == 1 })
	sc.child(0).Close(context.Background())
	eventually(t, "a crash loop, or a second warm start", func() bool {
		return b.CrashLoop(context.Background()) != nil || started() > 1
	})
	if err := b.CrashLoop(context.Background()); err == nil || !strings.Contains(err.Error(), "ended while warm") {
		t.Fatalf("a warm session ended unused, %d started: CrashLoop %v", started(), err)
	}
}

// TestWarmEndsAreACrashLoop: warm children that each end unused, right
// after they answered initialize, are a crash loop once CrashLoop of them
// ended in a row: the next start waits. Before, each warm start that
// answered initialize wiped out the count, and they were restarted back
// to back, over a hundred a second, with readiness OK; and one that
// ended before it was kept stayed "warm", dead, and was never replaced.
func TestWarmEndsAreACrashLoop(t *testing.T) {
	sc := &script{onReady: func(c *scripted) { c.Close(context.Background()) }}
	b := New(Options{Dial: sc.dial, Warm: 1, CrashLoop: 3, RestartBackoff: time.Hour, MaxRestartBackoff: time.Hour})
	defer b.Close(context.Background())
	started := func() int {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.started)
	}
	eventually(t, "a crash loop, or 50 warm starts", func() bool {
		return b.CrashLoop(context.Background()) != nil || started() >= 50
	})
	if err := b.CrashLoop(context.Background()); err == nil || !strings.Contains(err.Error(), "ended while warm") {
		t.Fatalf("%d warm children ended unused: CrashLoop %v", started(), err)
	}
}
