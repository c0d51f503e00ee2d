package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/reqstate"
)

// openGet opens a 2025-11-25 session's GET stream; the caller closes the
// response's body. It fails the test when no response header arrives in
// waitFor.
func openGet(t *testing.T, url, session string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	type got struct {
		resp *http.Response
		err  error
	}
	c := make(chan got, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		c <- got{resp, err}
	}()
	select {
	case g := <-c:
		if g.err != nil {
			cancel()
			t.Fatalf("GET: %v", g.err)
		}
		body := g.resp.Body
		g.resp.Body = readCloser{body, func() error { cancel(); return body.Close() }}
		t.Cleanup(func() { g.resp.Body.Close() })
		return g.resp
	case <-time.After(waitFor):
		cancel()
		t.Fatal("GET: no response header")
		return nil
	}
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

func deleteSession(t *testing.T, url, session string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d, want 204", resp.StatusCode)
	}
}

// TestOldClientEndedSessionForgotten: a session that ended is forgotten:
// its id gets 404 on a GET as on a POST, never a stream that ends at once.
func TestOldClientEndedSessionForgotten(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			ended := rawInit(t, e.px)
			deleteSession(t, e.px, ended)
			if resp := openGet(t, e.px, ended); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET with the id of a deleted session: %d, want 404", resp.StatusCode)
			}
			died := rawInit(t, e.px)
			kids := e.kids.list()
			kids[len(kids)-1].kill() // as if the process exited
			deadline := time.Now().Add(waitFor)
			for {
				status, _ := rawPost(t, e.px, died, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
				if status == http.StatusNotFound {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session whose child exited still answers: %d", status)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if resp := openGet(t, e.px, died); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET with the id of a session whose child exited: %d, want 404", resp.StatusCode)
			}
			if st := e.stats(); st.Sessions != 0 {
				t.Fatalf("after both sessions ended: %+v", st)
			}
		})
	}
}

// TestOldClientOneGetStream: a session has one GET stream at a time; a
// second is refused with 409 while the first is open, and accepted once
// it closed.
func TestOldClientOneGetStream(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			id := rawInit(t, e.px)
			first := openGet(t, e.px, id)
			if first.StatusCode != http.StatusOK {
				t.Fatalf("the first GET stream: %d", first.StatusCode)
			}
			second := openGet(t, e.px, id)
			if second.StatusCode != http.StatusConflict {
				t.Fatalf("a second GET stream while the first is open: %d, want 409", second.StatusCode)
			}
			second.Body.Close()
			first.Body.Close()
			deadline := time.Now().Add(waitFor)
			for {
				again := openGet(t, e.px, id)
				again.Body.Close()
				if again.StatusCode == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a GET stream after the first closed: %d", again.StatusCode)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestOldClientIDInFlight: a request whose id is that of a request still
// in flight on the session is refused (-32600) and never reaches the
// child, where its answer would go to the other's POST.
func TestOldClientIDInFlight(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			id := rawInit(t, e.px)
			hdr := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {id}}
			first := make(chan []byte, 1)
			go func() {
				_, b := postHdr(e.px, hdr, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": "wait", "arguments": map[string]any{}}})
				first <- b
			}()
			select {
			case <-e.entered:
			case <-time.After(waitFor):
				t.Fatal("the first call did not reach the child")
			}
			t.Cleanup(func() { // ends the waiting call, whatever happened
				for _, k := range e.kids.list() {
					k.kill()
				}
			})
			second := make(chan []byte, 1)
			go func() {
				_, b := postHdr(e.px, hdr, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
				second <- b
			}()
			select {
			case b := <-second:
				var m struct {
					ID    json.RawMessage     `json:"id"`
					Error *struct{ Code int } `json:"error"`
				}
				if json.Unmarshal(b, &m) != nil || m.Error == nil || m.Error.Code != -32600 || string(m.ID) != "3" || !bytes.Contains(b, []byte("in use")) {
					t.Fatalf("a second request with id 3 in flight: %s, want -32600", b)
				}
			case b := <-first:
				t.Fatalf("the first call was answered by the second's request: %s", b)
			case <-time.After(waitFor):
				t.Fatal("a second request with an id in flight was not refused")
			}
			select {
			case b := <-first:
				t.Fatalf("the first call ended before its child did: %s", b)
			default:
			}
		})
	}
}

// refusingKids are children that refuse an initialize from a client named
// "refused" and answer every other request with an empty result.
func refusingKids() *scriptKids {
	return &scriptKids{answer: func(m *rpc.Message) any {
		if m.Method == "initialize" {
			if bytes.Contains(m.Params, []byte(`"refused"`)) {
				return map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "not you"}}
			}
			return map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "s", "version": "1"}}}
		}
		return map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}}
	}}
}

// TestOldClientFailedInitialize: an initialize the child refuses creates
// no session: the response carries no session id, the child is stopped,
// and its process slot is free for the next client (here the only one).
func TestOldClientFailedInitialize(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			kids := refusingKids()
			var tr http.RoundTripper
			var stats func() bridge.Stats
			if kind == "bridge" {
				b := bridge.New(bridge.Options{Dial: kids.dial, MaxSessions: 1})
				t.Cleanup(func() { b.Close(context.Background()) })
				tr, stats = b, b.Stats
			} else {
				d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, MaxProcs: 1})
				t.Cleanup(func() { d.Close(context.Background()) })
				tr, stats = d, d.Stats
			}
			init := func(name string) (*http.Response, []byte) {
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
					"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": name, "version": "1"}}})
				return sendRaw(t, context.Background(), tr, reqstate.Principal{}, nil, body)
			}
			resp, body := init("refused")
			if !bytes.Contains(body, []byte("not you")) || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatalf("a refused initialize: %d %q %s, want the child's error and no session", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
			}
			stopped(t, kids.list()[0], "a refused initialize")
			if st := stats(); st.Sessions != 0 {
				t.Fatalf("after a refused initialize: %+v, want no session", st)
			}
			// The slot is freed just after the refusal went out: a client
			// as quick as this one may find it taken for a moment.
			deadline := time.Now().Add(waitFor)
			for resp, body = init("welcome"); bytes.Contains(body, []byte("--max-procs")) && time.Now().Before(deadline); resp, body = init("welcome") {
				time.Sleep(10 * time.Millisecond)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !bytes.Contains(body, []byte(`"protocolVersion"`)) {
				t.Fatalf("the next initialize, with the only slot: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestModernInitializeNotLegacy: an initialize carrying the 2026-07-28
// _meta is a modern client's, not the start of a 2025-11-25 session: it
// gets no session id, starts no child of its own, and is answered as a
// method 2026-07-28 does not have (on a Bridge, never by relaying it into
// an upstream session, which go-sdk answers "duplicate initialize").
func TestModernInitializeNotLegacy(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			kids := &children{srv: oldServer(make(chan struct{}, 1))}
			var tr http.RoundTripper
			if kind == "bridge" {
				b := bridge.New(bridge.Options{Dial: kids.dial})
				t.Cleanup(func() { b.Close(context.Background()) })
				tr = b
			} else {
				d := bridge.NewDirect(kids.dial, nil)
				t.Cleanup(func() { d.Close(context.Background()) })
				tr = d
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "m", "version": "1"},
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
			h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"initialize"}}
			resp, b := sendRaw(t, context.Background(), tr, reqstate.Principal{}, h, body)
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
				t.Fatalf("a modern initialize was served as a 2025-11-25 session's: session %q, %d %s", sid, resp.StatusCode, b)
			}
			// As a 2026-07-28 HTTP server answers a method it does not
			// have; the bridge never relays it into its upstream session.
			if r := decodeResultID(t, resp, b, "1"); resp.StatusCode != http.StatusNotFound || r.Error == nil || r.Error.Code != -32601 {
				t.Fatalf("a modern initialize: %d %s, want 404 and -32601 with its id", resp.StatusCode, b)
			}
		})
	}
}

// openThreeSessions opens three sessions on b, in this order: an idle
// bridged one (alice's finished call), a held call's (bob's), and a
// 2025-11-25 client's.
func openThreeSessions(t *testing.T, b *bridge.Bridge) {
	t.Helper()
	if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("count: %s", r.raw)
	}
	onlyKey(t, straight(t, b, user("bob"), "tools/call", tool("ask", nil, "", nil), nil))
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
	if resp, b := sendRaw(t, context.Background(), b, reqstate.Principal{}, nil, body); resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
}

// TestCloseStopsEverySession: Close stops every child before it returns: an idle bridged
// session's, a held call's, a 2025-11-25 client session's; later calls
// are refused and start none.
func TestCloseStopsEverySession(t *testing.T) {
	kids := &children{srv: sessionServer(nil)}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	openThreeSessions(t, b)
	if st := b.Stats(); st.Sessions != 3 || st.Holds != 1 {
		t.Fatalf("before Close: %+v, want 3 sessions and a hold", st)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, c := range kids.list() {
		stoppedNow(t, c, []string{"the idle session", "the held call's session", "the 2025-11-25 client's session"}[i]+" after Close returned")
	}
	if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.Error == nil || !strings.Contains(r.Error.Message, "shutting down") {
		t.Fatalf("a call after Close: %s", r.raw)
	}
	if n := len(kids.list()); n != 3 {
		t.Fatalf("%d children started, want 3: a call after Close started one", n)
	}
	// A stopped session is forgotten once its connection has ended,
	// just after Close returned.
	deadline := time.Now().Add(waitFor)
	for st := b.Stats(); st != (bridge.Stats{}); st = b.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after Close: %+v, want nothing open", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDirectCloseStopsEverySession: Close stops a Direct's shared child
// and its 2025-11-25 client sessions' children.
func TestDirectCloseStopsEverySession(t *testing.T) {
	p := map[string]any{"name": "count", "arguments": map[string]any{}, "_meta": modernMeta()}
	dk := &children{srv: oldServer(make(chan struct{}, 1))}
	dd := bridge.NewDirectWith(bridge.DirectOptions{Dial: dk.dial})
	t.Cleanup(func() { dd.Close(context.Background()) })
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
	if resp, b := sendRaw(t, context.Background(), dd, reqstate.Principal{}, nil, body); resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
	if resp, b := sendRaw(t, context.Background(), dd, reqstate.Principal{}, standardHeader("tools/call", p), body); !bytes.Contains(b, []byte(`"text":"1"`)) {
		t.Fatalf("a modern count: %d %s", resp.StatusCode, b)
	}
	if st := dd.Stats(); st.Sessions != 2 {
		t.Fatalf("before Close: %+v, want 2 children", st)
	}
	if err := dd.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, c := range dk.list() {
		stoppedNow(t, c, []string{"the 2025-11-25 client's session", "the shared child"}[i]+" after Close returned")
	}
}

// TestHoldTTLs: a held call of an authenticated caller lives HoldTTL, an
// anonymous caller's AnonymousHoldTTL, which never exceeds HoldTTL. On a
// fake clock (testing/synctest).
func TestHoldTTLs(t *testing.T) {
	hold := func(t *testing.T, b *bridge.Bridge, p reqstate.Principal) (state, key string) {
		t.Helper()
		r := straight(t, b, p, "tools/call", tool("ask", nil, "", nil), nil)
		k, _ := onlyKey(t, r)
		return r.Result.RequestState, k
	}
	resume := func(t *testing.T, b *bridge.Bridge, p reqstate.Principal, state, key string) result {
		t.Helper()
		return straight(t, b, p, "tools/call", tool("ask", nil, state, map[string]any{key: answer("x")}), nil)
	}
	holds := func(t *testing.T, b *bridge.Bridge, after time.Duration, want int, what string) {
		t.Helper()
		time.Sleep(after)
		synctest.Wait()
		if got := b.Stats().Holds; got != want {
			t.Fatalf("%s: %d holds, want %d", what, got, want)
		}
	}
	t.Run("anonymous shorter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			kids := &children{srv: sessionServer(nil)}
			b := bridge.New(bridge.Options{Dial: kids.dial, HoldTTL: 10 * time.Minute, AnonymousHoldTTL: time.Minute})
			defer b.Close(context.Background())
			anonState, anonKey := hold(t, b, reqstate.Principal{})
			aliceState, aliceKey := hold(t, b, user("alice"))
			hold(t, b, user("alice"))
			holds(t, b, time.Minute-time.Second, 3, "before AnonymousHoldTTL")
			holds(t, b, 2*time.Second, 2, "after AnonymousHoldTTL")
			if r := resume(t, b, reqstate.Principal{}, anonState, anonKey); r.Error == nil || !strings.Contains(r.Error.Message, "start the call over") {
				t.Fatalf("the anonymous hold after AnonymousHoldTTL: %s, want it gone", r.raw)
			}
			if r := resume(t, b, user("alice"), aliceState, aliceKey); r.text() != "got x" {
				t.Fatalf("alice's hold after AnonymousHoldTTL: %s, want it held still", r.raw)
			}
			holds(t, b, 9*time.Minute-2*time.Second, 1, "before HoldTTL")
			holds(t, b, 2*time.Second, 0, "after HoldTTL")
		})
	})
	t.Run("anonymous clamped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			kids := &children{srv: sessionServer(nil)}
			b := bridge.New(bridge.Options{Dial: kids.dial, HoldTTL: time.Minute, AnonymousHoldTTL: 10 * time.Minute})
			defer b.Close(context.Background())
			hold(t, b, reqstate.Principal{})
			hold(t, b, user("alice"))
			holds(t, b, time.Minute-time.Second, 2, "before HoldTTL")
			holds(t, b, 2*time.Second, 0, "after HoldTTL, which bounds AnonymousHoldTTL")
		})
	})
}

// TestLegacyParamsStripped: what only the proxy and a 2026-07-28 client
// speak never reaches a 2025-11-25 upstream: requestState and
// inputResponses (even an empty requestState, on a first call or a call
// that cannot pause) and the protocol's own _meta keys; the client's
// other _meta keys do.
func TestLegacyParamsStripped(t *testing.T) {
	ts := &taps{}
	kids := &children{srv: sessionServer(nil)}
	b := bridge.New(bridge.Options{Dial: ts.wrap(kids.dial)})
	t.Cleanup(func() { b.Close(context.Background()) })
	withExtra := func(p map[string]any) map[string]any {
		p["requestState"] = ""
		p["inputResponses"] = map[string]any{"elicitation-1": answer("x")}
		return p
	}
	send := func(method string, p map[string]any) {
		t.Helper()
		p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": allCaps, "progressToken": "pt-1", "example.com/k": 1}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": p})
		resp, raw := sendRaw(t, context.Background(), b, reqstate.Principal{}, nil, body)
		if r := decodeResult(t, resp, raw); r.Error != nil {
			t.Fatalf("%s: %s", method, raw)
		}
	}
	send("tools/call", withExtra(map[string]any{"name": "count", "arguments": map[string]any{}}))
	tl := withExtra(map[string]any{})
	tl["requestState"] = "bridge:not-a-hold:1" // a call that cannot pause has no hold to resume
	send("tools/list", tl)
	for _, method := range []string{"tools/call", "tools/list"} {
		ms := ts.messages(method)
		if len(ms) != 1 {
			t.Fatalf("%d %s requests upstream, want 1", len(ms), method)
		}
		p := string(ms[0].Params)
		for _, no := range []string{"requestState", "inputResponses", "io.modelcontextprotocol/"} {
			if strings.Contains(p, no) {
				t.Errorf("%s reached the upstream with %s: %s", method, no, p)
			}
		}
		for _, yes := range []string{`"progressToken":"pt-1"`, `"example.com/k":1`} {
			if !strings.Contains(p, yes) {
				t.Errorf("%s reached the upstream without %s: %s", method, yes, p)
			}
		}
	}
}

// TestPauseMissingCapability: a call whose upstream asks what the client
// declared it cannot answer (an elicitation, no elicitation capability)
// ends with -32021 naming it, and the upstream's request is answered
// with an error, so its call does not wait for an answer that never
// comes; the session serves the next call.
func TestPauseMissingCapability(t *testing.T) {
	asked := make(chan error, 1)
	ts := &taps{}
	kids := &children{srv: sessionServer(asked)}
	b := bridge.New(bridge.Options{Dial: ts.wrap(kids.dial)})
	t.Cleanup(func() { b.Close(context.Background()) })
	r := straight(t, b, reqstate.Principal{}, "tools/call", tool("ask", nil, "", nil), map[string]any{"sampling": map[string]any{}})
	if r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), "elicitation") {
		t.Fatalf("an elicitation for a client without the capability: %d %s, want 400 and -32021 naming elicitation", r.status, r.raw)
	}
	// The error answer goes out before the client's refusal does.
	var answered bool
	for _, m := range ts.messages("") {
		if m.ID != nil && m.Error != nil && strings.Contains(string(m.Error), "cannot answer") {
			answered = true
		}
	}
	if !answered {
		t.Fatal("the upstream's elicitation was not answered with an error")
	}
	select {
	case err := <-asked:
		if err == nil {
			t.Fatal("the upstream's elicitation returned an answer")
		}
	case <-time.After(waitFor):
		t.Fatal("the upstream's elicitation never ended")
	}
	if st := b.Stats(); st.Holds != 0 || st.Sessions != 1 {
		t.Fatalf("after the refusal: %+v, want no hold and the one session", st)
	}
	if r := straight(t, b, reqstate.Principal{}, "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("the next call: %s", r.raw)
	}
}

// gatedDial is a dial that waits, once entered, until the test lets it
// go: a session being opened while the proxy shuts down.
type gatedDial struct {
	kids    *children
	entered chan struct{}
	release chan struct{}
}

func newGatedDial(kids *children) *gatedDial {
	return &gatedDial{kids: kids, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gatedDial) dial(ctx context.Context) (bridge.Upstream, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.kids.dial(ctx)
}

// TestCloseWhileOpening: a session whose child was being started when
// Close was called is stopped once it is up, and its request refused: on
// a Bridge for a bridged call and for a 2025-11-25 initialize, on a
// Direct for the latter.
func TestCloseWhileOpening(t *testing.T) {
	initBody, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
	for _, c := range []struct {
		name string
		kind string
		send func(t *testing.T, tr http.RoundTripper) []byte
	}{
		{"bridged call", "bridge", func(t *testing.T, tr http.RoundTripper) []byte {
			return straight(t, tr, user("alice"), "tools/call", tool("count", nil, "", nil), nil).raw
		}},
		{"2025-11-25 initialize", "bridge", func(t *testing.T, tr http.RoundTripper) []byte {
			_, b := sendRaw(t, context.Background(), tr, reqstate.Principal{}, nil, initBody)
			return b
		}},
		{"2025-11-25 initialize", "direct", func(t *testing.T, tr http.RoundTripper) []byte {
			_, b := sendRaw(t, context.Background(), tr, reqstate.Principal{}, nil, initBody)
			return b
		}},
	} {
		t.Run(c.kind+" "+c.name, func(t *testing.T) {
			kids := &children{srv: sessionServer(nil)}
			g := newGatedDial(kids)
			var tr http.RoundTripper
			var closeFn func(context.Context) error
			if c.kind == "bridge" {
				b := bridge.New(bridge.Options{Dial: g.dial})
				tr, closeFn = b, b.Close
			} else {
				d := bridge.NewDirectWith(bridge.DirectOptions{Dial: g.dial})
				tr, closeFn = d, d.Close
			}
			got := make(chan []byte, 1)
			go func() { got <- c.send(t, tr) }()
			select {
			case <-g.entered:
			case <-time.After(waitFor):
				t.Fatal("the request did not start a child")
			}
			if err := closeFn(context.Background()); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			select {
			case b := <-got:
				if !bytes.Contains(b, []byte("shutting down")) {
					t.Fatalf("the request whose child started after Close: %s, want it refused", b)
				}
			case <-time.After(waitFor):
				t.Fatal("the request whose child started after Close got no answer")
			}
			started := kids.list()
			if len(started) != 1 {
				t.Fatalf("%d children started, want 1", len(started))
			}
			stoppedNow(t, started[0], "a session opened during Close, once its request was refused")
		})
	}
}
