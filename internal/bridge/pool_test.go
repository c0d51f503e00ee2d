package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/reqstate"
)

// eventually fails t unless cond holds within waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitFor); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitFor)
		}
	}
}

// TestWarmSessions (issue 28, item 6): with Warm 1 a session is opened
// before any call; the first call takes it (no child is started for the
// call), it is that caller's from then on, and another is started in the
// background for the next caller.
func TestWarmSessions(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 4, Warm: 1})
	eventually(t, "a warm session before any call", func() bool { return e.b.Stats().Warm == 1 })
	if n := len(e.kids.list()); n != 1 {
		t.Fatalf("%d children before any call, want the warm one", n)
	}
	if body := e.modern("alice"); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("alice: %s", body)
	}
	eventually(t, "a warm session again", func() bool { return e.b.Stats().Warm == 1 })
	if n, st := len(e.kids.list()), e.b.Stats(); n != 2 || st.Sessions != 2 || st.Idle != 1 {
		t.Fatalf("after alice's call: %d children, stats %+v; want alice's idle and a warm one", n, st)
	}
	// alice's next call is on her session (its count goes on), bob's on
	// the new warm one (a fresh count).
	if body := e.modern("alice"); !bytes.Contains(body, []byte(`"2"`)) {
		t.Fatalf("alice again: %s", body)
	}
	if body := e.modern("bob"); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("bob: %s", body)
	}
	eventually(t, "a third warm session", func() bool { return e.b.Stats().Warm == 1 && len(e.kids.list()) == 3 })
}

// TestWarmEvictedFirst (issue 28, item 6): warm sessions count against
// MaxSessions, and are the first stopped when a caller needs room: a
// 2025-11-25 initialize (which needs a child of its own) at the bound
// stops the warm session, not alice's idle one.
func TestWarmEvictedFirst(t *testing.T) {
	e := newEvictEnv(t, bridge.Options{MaxSessions: 2, Warm: 1})
	eventually(t, "a warm session", func() bool { return e.b.Stats().Warm == 1 })
	if body := e.modern("alice"); !bytes.Contains(body, []byte(`"1"`)) { // takes child 0
		t.Fatalf("alice: %s", body)
	}
	eventually(t, "the refill", func() bool { return e.b.Stats().Warm == 1 }) // child 1
	rawInit(t, e.px)                                                          // child 2, in place of 1
	e.wantStopped(t, "the initialize", false, true, false)
	if st := e.b.Stats(); st.Warm != 0 || st.Sessions != 2 {
		t.Fatalf("stats %+v: want alice's and the client session's, no warm one (no room)", st)
	}
}

// TestFirstUpstream (issue 28, item 1): an upstream handed over opened
// already (the proxy's era probe's child) serves the first call; no
// other is dialled for it.
func TestFirstUpstream(t *testing.T) {
	kids := &children{srv: oldServer(nil)}
	first, err := kids.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	b := bridge.New(bridge.Options{First: first, Dial: func(ctx context.Context) (bridge.Upstream, error) {
		dials.Add(1)
		return kids.dial(ctx)
	}})
	t.Cleanup(func() { b.Close(context.Background()) })
	px := serveProxy(t, b)
	e := &evictEnv{px: px, b: b, kids: kids}
	if body := e.modern(""); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("the first call: %s", body)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d upstreams dialled for the first call, want none (the one handed over)", n)
	}
}

// TestCrashLoop (issue 28, item 1): starts failing CrashLoop times in a
// row are a crash loop: CrashLoop says why, calls are refused at once
// without a start, starts back off; once the upstream starts again, in
// the background, the loop is over.
func TestCrashLoop(t *testing.T) {
	kids := &children{srv: oldServer(nil)}
	var broken atomic.Bool
	var dials atomic.Int32
	broken.Store(true)
	b := bridge.New(bridge.Options{CrashLoop: 2, RestartBackoff: 50 * time.Millisecond, MaxRestartBackoff: 200 * time.Millisecond,
		Dial: func(ctx context.Context) (bridge.Upstream, error) {
			dials.Add(1)
			if broken.Load() {
				return nil, errors.New("exec: boom: missing config")
			}
			return kids.dial(ctx)
		}})
	t.Cleanup(func() { b.Close(context.Background()) })
	e := &evictEnv{px: serveProxy(t, b), b: b, kids: kids}
	for range 2 {
		if body := e.modern(""); !strings.Contains(string(body), "could not be started") {
			t.Fatalf("a call while the upstream cannot start: %s", body)
		}
	}
	err := b.CrashLoop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 times in a row") || !strings.Contains(err.Error(), "boom: missing config") {
		t.Fatalf("CrashLoop after two failed starts: %v", err)
	}
	n := dials.Load()
	if body := e.modern(""); !strings.Contains(string(body), "keeps failing to start") {
		t.Fatalf("a call in the crash loop: %s", body)
	}
	if got := dials.Load(); got > n+1 { // the background retry may have run
		t.Fatalf("%d starts for a call in the crash loop", got-n)
	}
	eventually(t, "starts retried in the background", func() bool { return dials.Load() >= n+2 })
	broken.Store(false)
	eventually(t, "the end of the crash loop", func() bool { return b.CrashLoop(context.Background()) == nil })
	if st := b.Stats(); st.Warm != 1 {
		t.Fatalf("stats %+v: the retry's session should be kept warm", st)
	}
	if body := e.modern(""); !bytes.Contains(body, []byte(`"1"`)) {
		t.Fatalf("a call after the crash loop: %s", body)
	}
}

// TestWarmStartFails: a call that waited for a warm session whose start
// failed starts its own, and gets that start's error, rather than wait
// again on warm starts that keep failing (here with no CrashLoop to stop
// them).
func TestWarmStartFails(t *testing.T) {
	var dials atomic.Int32
	b := bridge.New(bridge.Options{Warm: 1, Dial: func(ctx context.Context) (bridge.Upstream, error) {
		dials.Add(1)
		time.Sleep(20 * time.Millisecond) // the call finds the warm start under way
		return nil, errors.New("exec: boom")
	}})
	t.Cleanup(func() { b.Close(context.Background()) })
	e := &evictEnv{px: serveProxy(t, b), b: b}
	done := make(chan []byte, 1)
	go func() { done <- e.modern("") }()
	select {
	case body := <-done:
		if !strings.Contains(string(body), "could not be started") {
			t.Fatalf("a call while every start fails: %s", body)
		}
	case <-time.After(waitFor):
		t.Fatalf("the call did not end within %v (%d starts)", waitFor, dials.Load())
	}
}

// TestDirectCrashLoop (issue 28, item 1): in front of a modern command, a
// shared child that ends before answering anything, CrashLoop times in a
// row, is a crash loop: CrashLoop says so, requests are refused at once,
// and the Direct retries in the background (a ping) until a child
// answers, which ends the loop.
func TestDirectCrashLoop(t *testing.T) {
	var runs, dials atomic.Int32
	var broken atomic.Bool
	broken.Store(true)
	dial := dialer(t, modernServer(&runs), &dials)
	d := bridge.NewDirectWith(bridge.DirectOptions{CrashLoop: 2, RestartBackoff: 50 * time.Millisecond, MaxRestartBackoff: 200 * time.Millisecond,
		Dial: func(ctx context.Context) (bridge.Upstream, error) {
			up, err := dial(ctx)
			if err == nil && broken.Load() {
				up.Close(ctx) // it exits at once
			}
			return up, err
		}})
	t.Cleanup(func() { d.Close(context.Background()) })
	list := func() []byte {
		p := map[string]any{"_meta": modernMeta()}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": p})
		_, raw := sendRaw(t, context.Background(), d, reqstate.Principal{}, standardHeader("tools/list", p), body)
		return raw
	}
	eventually(t, "a crash loop", func() bool {
		list()
		return d.CrashLoop(context.Background()) != nil
	})
	if err := d.CrashLoop(context.Background()); !strings.Contains(err.Error(), "ended before answering any request") {
		t.Fatalf("CrashLoop: %v", err)
	}
	if raw := list(); !strings.Contains(string(raw), "keeps failing to start") {
		t.Fatalf("a request in the crash loop: %s", raw)
	}
	broken.Store(false)
	eventually(t, "the end of the crash loop", func() bool { return d.CrashLoop(context.Background()) == nil })
	if raw := list(); !strings.Contains(string(raw), `"confirm"`) {
		t.Fatalf("a request after the crash loop: %s", raw)
	}
}

// TestDirectClosedStartsNothing: once closed, a Direct starts no shared
// child (nothing would stop it), for a request or a crash loop's retry.
func TestDirectClosedStartsNothing(t *testing.T) {
	var runs, dials atomic.Int32
	d := bridge.NewDirect(dialer(t, modernServer(&runs), &dials), nil)
	d.Close(context.Background())
	p := map[string]any{"_meta": modernMeta()}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": p})
	_, raw := sendRaw(t, context.Background(), d, reqstate.Principal{}, standardHeader("tools/list", p), body)
	if n := dials.Load(); n != 0 || !strings.Contains(string(raw), "-32603") {
		t.Fatalf("a request after Close: %d children started, %s", n, raw)
	}
}

// TestFirstExpires: the upstream handed over opened already (First),
// which Warm does not count, is stopped once unused for IdleTimeout, as
// an idle session is.
func TestFirstExpires(t *testing.T) {
	kids := &children{srv: oldServer(nil)}
	first, err := kids.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := bridge.New(bridge.Options{First: first, Dial: kids.dial, IdleTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { b.Close(context.Background()) })
	stopped(t, kids.list()[0], "the First upstream unused past IdleTimeout")
	eventually(t, "no warm session left", func() bool { return b.Stats().Warm == 0 })
}
