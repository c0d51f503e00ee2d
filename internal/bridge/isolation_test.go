package bridge_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

// newSessionBridge is a Bridge in front of sessionServer children.
func newSessionBridge(t *testing.T, o bridge.Options) (*bridge.Bridge, *children) {
	t.Helper()
	kids := &children{srv: sessionServer(nil)}
	o.Dial = kids.dial
	b := bridge.New(o)
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, kids
}

// refusedAsReplay fails the test unless r is the guard's refusal of a
// token that was used already (as the bridge gives it for an older round).
func refusedAsReplay(t *testing.T, r result, what string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || !strings.Contains(string(r.Error.Data), "replayed") {
		t.Fatalf("%s was not refused as replayed: %s", what, r.raw)
	}
}

// TestRoundCheckWithoutStore: with no single-use store, the guard opens
// a token as often as it is sent, and the hold's round is the only
// defence: the round-1 token resent after round 2 is refused, and the
// round-2 token still completes the call.
func TestRoundCheckWithoutStore(t *testing.T) {
	b, _ := newSessionBridge(t, bridge.Options{})
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{Upstream: "http://legacy.bridge/mcp", Transport: b,
		Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{})}) // no Store
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{px: srv.URL + "/mcp", b: b}

	r := call(t, e, "", "tools/call", tool("survey", nil, "", nil), nil)
	k1, _ := onlyKey(t, r)
	tok1 := r.Result.RequestState
	r = call(t, e, "", "tools/call", tool("survey", nil, tok1, map[string]any{k1: answer("Ada")}), nil)
	k2, ir := onlyKey(t, r)
	if k2 == k1 || !strings.Contains(string(ir), "colour") {
		t.Fatalf("round 2: %s", r.raw)
	}
	tok2 := r.Result.RequestState
	refusedAsReplay(t, call(t, e, "", "tools/call", tool("survey", nil, tok1, map[string]any{k1: answer("Ada")}), nil), "the round-1 token sent again after round 2")
	refusedAsReplay(t, call(t, e, "", "tools/call", tool("survey", nil, tok1, map[string]any{k2: answer("red")}), nil), "the round-1 token with round 2's answers")
	if done := call(t, e, "", "tools/call", tool("survey", nil, tok2, map[string]any{k2: answer("green")}), nil); done.text() != "Ada,green" {
		t.Fatalf("the round-2 token after the refused replays: %s", done.raw)
	}
}

// TestIdleSessionsStayWithTheirCaller: a session goes back to the idle
// sessions of the caller that used it: alice's next call gets it again,
// and neither bob nor an anonymous caller ever does.
func TestIdleSessionsStayWithTheirCaller(t *testing.T) {
	b, kids := newSessionBridge(t, bridge.Options{})
	count := func(p reqstate.Principal) string {
		t.Helper()
		r := straight(t, b, p, "tools/call", tool("count", nil, "", nil), nil)
		if r.Error != nil {
			t.Fatalf("count: %s", r.raw)
		}
		return r.text()
	}
	for _, c := range []struct {
		who  reqstate.Principal
		name string
		want string
	}{
		{user("alice"), "alice", "1"},
		{user("bob"), "bob", "1"},
		{reqstate.Principal{}, "an anonymous caller", "1"},
		{user("alice"), "alice again", "2"},
		{user("bob"), "bob again", "2"},
		{reqstate.Principal{}, "an anonymous caller again", "2"},
	} {
		if got := count(c.who); got != c.want {
			t.Fatalf("%s: count %s, want %s (a session was shared between callers, or lost)", c.name, got, c.want)
		}
	}
	if n := len(kids.list()); n != 3 {
		t.Fatalf("%d sessions opened, want 3 (one per caller)", n)
	}
}

// TestPrincipalKeyLengthPrefixed: the issuer and subject of a principal
// do not run together into one key: (iss "a", sub "bc") and (iss "ab",
// sub "c") are two callers with two sessions.
func TestPrincipalKeyLengthPrefixed(t *testing.T) {
	b, kids := newSessionBridge(t, bridge.Options{})
	for _, p := range []reqstate.Principal{{Issuer: "a", Subject: "bc"}, {Issuer: "ab", Subject: "c"}, {Issuer: "", Subject: "abc"}, {Issuer: "abc", Subject: ""}} {
		r := straight(t, b, p, "tools/call", tool("count", nil, "", nil), nil)
		if r.text() != "1" {
			t.Fatalf("caller %+v: count %s, want 1: it was given another caller's session", p, r.raw)
		}
	}
	if n := len(kids.list()); n != 4 {
		t.Fatalf("%d sessions opened, want 4", n)
	}
}

// TestResumeBoundToCallerAndTarget: the bridge itself checks a resume
// against its hold (the guard in front does too, but the bridge is the
// last line): another caller, an anonymous one, another tool or another
// method presenting the hold's state is refused, and the hold stays for
// its own caller.
func TestResumeBoundToCallerAndTarget(t *testing.T) {
	b, _ := newSessionBridge(t, bridge.Options{})
	alice := user("alice")
	r := straight(t, b, alice, "tools/call", tool("ask", nil, "", nil), nil)
	k, _ := onlyKey(t, r)
	st := r.Result.RequestState
	if !strings.HasPrefix(st, "bridge:") {
		t.Fatalf("the bridge's own state: %q", st)
	}
	ans := map[string]any{k: answer("x")}
	refusedAsReplay(t, straight(t, b, user("bob"), "tools/call", tool("ask", nil, st, ans), nil), "bob resuming alice's hold")
	refusedAsReplay(t, straight(t, b, reqstate.Principal{Issuer: "other", Subject: "alice"}, "tools/call", tool("ask", nil, st, ans), nil), "alice of another issuer resuming the hold")
	refusedAsReplay(t, straight(t, b, reqstate.Principal{}, "tools/call", tool("ask", nil, st, ans), nil), "an anonymous caller resuming alice's hold")
	refusedAsReplay(t, straight(t, b, alice, "tools/call", tool("count", nil, st, ans), nil), "alice resuming the hold with another tool")
	refusedAsReplay(t, straight(t, b, alice, "prompts/get", map[string]any{"name": "ask", "requestState": st, "inputResponses": ans}, nil), "alice resuming the hold with another method")
	if done := straight(t, b, alice, "tools/call", tool("ask", nil, st, ans), nil); done.text() != "got x" {
		t.Fatalf("alice's own resume after the refusals: %s", done.raw)
	}
	if st := b.Stats(); st.Holds != 0 {
		t.Fatalf("after the call: %+v", st)
	}
}
