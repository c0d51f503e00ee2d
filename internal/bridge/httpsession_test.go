package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// httpUpstream is go-sdk v1.8.0's Streamable HTTP server in stateful mode
// (sessions, the GET stream, DELETE) on 127.0.0.1, serving legacyServer
// plus tools that need the HTTP transport's ways: a roots/list sent on
// the session's GET stream, and a result larger than a small limit.
type httpUpstream struct {
	url     string
	srv     *mcp.Server
	deleted atomic.Int32
	deletes atomic.Int32 // DELETE requests with a session id
	gets    atomic.Int32 // GET streams opened

	getReady chan struct{} // closed when a GET stream is connected
	getOnce  sync.Once

	authMu sync.Mutex
	auths  map[string]int // Authorization header of each request -> how many
}

// authorizations returns what auths counted so far.
func (u *httpUpstream) authorizations() map[string]int {
	u.authMu.Lock()
	defer u.authMu.Unlock()
	m := make(map[string]int, len(u.auths))
	for k, v := range u.auths {
		m[k] = v
	}
	return m
}

func newHTTPUpstream(t *testing.T) *httpUpstream {
	u := &httpUpstream{getReady: make(chan struct{}), auths: map[string]int{}}
	u.srv = legacyServer(&u.deleted)
	mcp.AddTool(u.srv, &mcp.Tool{Name: "roots-later"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		select {
		case <-u.getReady:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		// Not in the request's context: go-sdk sends it on the session's
		// GET stream, as servers often send roots/list.
		res, err := req.Session.ListRoots(context.Background(), nil)
		if err != nil {
			return nil, nil, err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots " + strings.Join(uris, " ")}}}, nil, nil
	})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "big"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 8<<10)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.authMu.Lock()
		u.auths[r.Header.Get("Authorization")]++
		u.authMu.Unlock()
		switch {
		case r.Method == http.MethodDelete && r.Header.Get("Mcp-Session-Id") != "":
			u.deletes.Add(1)
		case r.Method == http.MethodGet:
			u.gets.Add(1)
			w = &flushSignal{ResponseWriter: w, u: u}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

// flushSignal tells the roots-later tool that a GET stream is connected:
// go-sdk flushes its headers while it registers the stream, so a message
// sent after the flush waits for the stream and is delivered on it.
type flushSignal struct {
	http.ResponseWriter
	u *httpUpstream
}

func (f *flushSignal) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	f.u.getOnce.Do(func() { close(f.u.getReady) })
}

func (f *flushSignal) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// newHTTPEnv puts the proxy and a bridge whose sessions are HTTPSessions
// in front of u; passthrough, when true, passes what is not 2026-07-28
// straight to u.
func newHTTPEnv(t *testing.T, u *httpUpstream, bo *bridge.Options, max int, passthrough bool) *env {
	return newHTTPEnvAuth(t, u, bo, max, passthrough, false)
}

// newHTTPEnvAuth is newHTTPEnv with proxy.Options.ForwardAuthorization.
func newHTTPEnvAuth(t *testing.T, u *httpUpstream, bo *bridge.Options, max int, passthrough, fwdAuth bool) *env {
	e := &env{}
	o := bridge.Options{}
	if bo != nil {
		o = *bo
	}
	o.Dial = func(context.Context) (bridge.Upstream, error) {
		e.dials.Add(1)
		return bridge.NewHTTPSession(bridge.HTTPOptions{URL: u.url, Transport: http.DefaultTransport, MaxMessage: max}), nil
	}
	if passthrough {
		o.Passthrough = http.DefaultTransport
	}
	e.b = bridge.New(o)
	t.Cleanup(func() { e.b.Close(context.Background()) })
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{
		Upstream:             u.url,
		Guard:                mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}),
		Transport:            e.b,
		ForwardAuthorization: fwdAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.px = srv.URL + "/mcp"
	return e
}

// TestHTTPBridgedElicitation: a 2025-11-25 go-sdk server over Streamable
// HTTP elicits and samples mid-call on the POST's event stream; through
// the bridge each is a sealed round, the retry completes the call, a
// replayed or changed retry is refused, and Close ends the sessions with
// DELETE.
func TestHTTPBridgedElicitation(t *testing.T) {
	u := newHTTPUpstream(t)
	e := newHTTPEnv(t, u, nil, 0, false)
	r := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil)
	k, ir := onlyKey(t, r)
	if !strings.Contains(string(ir), `"elicitation/create"`) || !strings.Contains(string(ir), "Delete a?") {
		t.Fatalf("input request %s", ir)
	}
	tok := r.Result.RequestState
	if !strings.HasPrefix(tok, "v1.") || strings.Contains(tok, "bridge:") {
		t.Fatalf("the client did not get a sealed token: %q", tok)
	}
	done := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, tok, map[string]any{k: approve(true)}), nil)
	if done.text() != "deleted a" || done.Result.ResultType != "complete" {
		t.Fatalf("resume: %s", done.raw)
	}
	again := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, tok, map[string]any{k: approve(true)}), nil)
	if again.Error == nil || !strings.Contains(string(again.Error.Data), "replayed") {
		t.Fatalf("replay: %s", again.raw)
	}
	r = call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "b"}, "", nil), nil)
	k, _ = onlyKey(t, r)
	moved := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "c"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
	if moved.Error == nil || !strings.Contains(string(moved.Error.Data), "arguments_changed") {
		t.Fatalf("changed arguments: %s", moved.raw)
	}
	if n := u.deleted.Load(); n != 1 {
		t.Fatalf("%d deletions, want 1", n)
	}

	r = call(t, e, "", "tools/call", tool("sample", nil, "", nil), nil)
	k, ir = onlyKey(t, r)
	if !strings.Contains(string(ir), "sampling/createMessage") {
		t.Fatalf("input request %s", ir)
	}
	r = call(t, e, "", "tools/call", tool("sample", nil, r.Result.RequestState, map[string]any{k: map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "hello"}}}), nil)
	if r.text() != "model said hello" {
		t.Fatalf("sampling: %s", r.raw)
	}

	sessions := e.b.Stats().Sessions
	if sessions == 0 {
		t.Fatal("no upstream session open")
	}
	if err := e.b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := u.deletes.Load(); int(n) != sessions {
		t.Fatalf("%d DELETEs for %d sessions", n, sessions)
	}
}

// TestHTTPBridgedAuthorization: the bridge's HTTP sessions follow
// proxy.Options.ForwardAuthorization as the proxy's other paths do: by
// default the client's Authorization reaches the upstream on none of the
// session's requests; with it set, every request of the session
// (initialize, the call, the answer, the GET stream) carries the header
// of the caller it was opened for, and a request with another
// Authorization does not reuse that session.
func TestHTTPBridgedAuthorization(t *testing.T) {
	flow := func(t *testing.T, e *env, auth, item string) {
		t.Helper()
		hdr := http.Header{"Authorization": {auth}}
		r := callWith(t, e, hdr, "tools/call", tool("delete", map[string]any{"item": item}, "", nil), nil)
		k, _ := onlyKey(t, r)
		done := callWith(t, e, hdr, "tools/call", tool("delete", map[string]any{"item": item}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
		if done.text() != "deleted "+item {
			t.Fatalf("resume: %s", done.raw)
		}
	}
	t.Run("dropped", func(t *testing.T) {
		u := newHTTPUpstream(t)
		e := newHTTPEnvAuth(t, u, nil, 0, false, false)
		flow(t, e, "Bearer tok-a", "a")
		if got := u.authorizations(); len(got) != 1 || got[""] == 0 {
			t.Fatalf("Authorization headers upstream: %v, want none", got)
		}
	})
	t.Run("forwarded", func(t *testing.T) {
		u := newHTTPUpstream(t)
		e := newHTTPEnvAuth(t, u, nil, 0, false, true)
		flow(t, e, "Bearer tok-a", "a")
		got := u.authorizations()
		// initialize, initialized, the call, the answer (and the GET
		// stream, maybe not yet).
		if len(got) != 1 || got["Bearer tok-a"] < 4 {
			t.Fatalf("Authorization headers upstream: %v, want only tok-a on each request", got)
		}
		flow(t, e, "Bearer tok-b", "b") // the same (anonymous) caller, another token
		if n := e.dials.Load(); n != 2 {
			t.Fatalf("%d sessions opened, want 2 (one per Authorization)", n)
		}
		after := u.authorizations()
		if len(after) != 2 || after["Bearer tok-b"] < 4 {
			t.Fatalf("Authorization headers upstream: %v, want tok-a's and tok-b's only", after)
		}
		flow(t, e, "Bearer tok-a", "c") // reuses tok-a's idle session
		if n := e.dials.Load(); n != 2 {
			t.Fatalf("%d sessions opened, want 2", n)
		}
	})
}

// TestHTTPBridgedRootsOnGET: with RootsFromClient, a roots/list the
// upstream sends on the session's GET stream during a call is that call's
// input request too; without it (the default), the operator's roots
// answer it and the caller is never asked.
func TestHTTPBridgedRootsOnGET(t *testing.T) {
	t.Run("operator", func(t *testing.T) {
		u := newHTTPUpstream(t)
		e := newHTTPEnv(t, u, &bridge.Options{Roots: []string{"file:///srv/data"}, RootsWait: time.Millisecond}, 0, false)
		r := call(t, e, "", "tools/call", tool("roots-later", nil, "", nil), nil)
		if r.text() != "roots file:///srv/data" {
			t.Fatalf("want the operator's roots without a round, got %s", r.raw)
		}
	})
	u := newHTTPUpstream(t)
	e := newHTTPEnv(t, u, &bridge.Options{RootsFromClient: true}, 0, false)
	r := call(t, e, "", "tools/call", tool("roots-later", nil, "", nil), nil)
	k, ir := onlyKey(t, r)
	if !strings.Contains(string(ir), "roots/list") {
		t.Fatalf("input request %s", ir)
	}
	if u.gets.Load() == 0 {
		t.Fatal("the session opened no GET stream")
	}
	r = call(t, e, "", "tools/call", tool("roots-later", nil, r.Result.RequestState, map[string]any{k: map[string]any{"roots": []any{map[string]any{"uri": "file:///work"}}}}), nil)
	if r.text() != "roots file:///work" {
		t.Fatalf("roots: %s", r.raw)
	}
}

// TestHTTPBridgeBounds: a message beyond the session's limit fails its
// call with an error, never a hang, and the session serves the next one.
func TestHTTPBridgeBounds(t *testing.T) {
	u := newHTTPUpstream(t)
	e := newHTTPEnv(t, u, nil, 4<<10, false)
	r := call(t, e, "", "tools/call", tool("big", nil, "", nil), nil)
	if r.Error == nil || !strings.Contains(r.Error.Message, "message limit") {
		t.Fatalf("an oversized answer: %s", r.raw)
	}
	r = call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil)
	onlyKey(t, r)
}

// TestHTTPBridgePassthrough: with Passthrough, a 2025-11-25 client's own
// session (initialize, its Mcp-Session-Id, DELETE) reaches the upstream
// untouched, next to bridged 2026-07-28 calls.
func TestHTTPBridgePassthrough(t *testing.T) {
	u := newHTTPUpstream(t)
	e := newHTTPEnv(t, u, nil, 0, true)
	post := func(sid string, msg string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.px, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", bridge.LegacyVersion)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !bytes.Contains(b, []byte(`"name":"legacy"`)) {
		t.Fatalf("initialize through the bridge: %d %q %s", resp.StatusCode, sid, b)
	}
	if resp, b = post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, b)
	}
	if resp, b = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"roots-later"`)) {
		t.Fatalf("tools/list in the old session: %d %s", resp.StatusCode, b)
	}
	if e.dials.Load() != 0 {
		t.Fatalf("the old client's traffic opened %d bridge sessions", e.dials.Load())
	}
	r := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil)
	onlyKey(t, r)
	req, _ := http.NewRequest(http.MethodDelete, e.px, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode/100 != 2 || u.deletes.Load() != 1 {
		t.Fatalf("DELETE: %d, %d reached the upstream", dresp.StatusCode, u.deletes.Load())
	}
}

// rawSession is an HTTPSession driven by an rpc.Conn, as the bridge does.
func rawSession(t *testing.T, url string) (*bridge.HTTPSession, *rpc.Conn) {
	t.Helper()
	s := bridge.NewHTTPSession(bridge.HTTPOptions{URL: url})
	t.Cleanup(func() { s.Close(context.Background()) })
	c := rpc.NewConn(s, func(*rpc.Message) {})
	return s, c
}

func initialize(t *testing.T, c *rpc.Conn) {
	t.Helper()
	m, err := c.Call(context.Background(), "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if err != nil || m.Error != nil {
		t.Fatalf("initialize: %v %s", err, m.Error)
	}
	if err := c.Notify("notifications/initialized", nil); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPSessionErrors: an HTTP error answer to a request is a JSON-RPC
// error with its id; a session the upstream lost (404) ends Recv, and the
// call in flight gets ErrClosed, not a hang.
func TestHTTPSessionErrors(t *testing.T) {
	var fail atomic.Bool
	u := newHTTPUpstream(t)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() && r.Method == http.MethodPost {
			http.Error(w, "upstream is unwell", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	_, c := rawSession(t, srv.URL+"/mcp")
	initialize(t, c)
	fail.Store(true)
	m, err := c.Call(context.Background(), "tools/list", nil)
	if err != nil || m.Error == nil || !strings.Contains(string(m.Error), "HTTP 502") {
		t.Fatalf("an HTTP error: %v %+v", err, m)
	}
	fail.Store(false)
	if m, err = c.Call(context.Background(), "tools/list", nil); err != nil || m.Error != nil {
		t.Fatalf("after the error: %v %s", err, m.Error)
	}
	for ss := range u.srv.Sessions() {
		ss.Close()
	}
	if _, err = c.Call(context.Background(), "tools/list", nil); !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("a lost session: want ErrClosed, got %v", err)
	}
	<-c.Done()
}

// TestHTTPSessionUnreachable: a request to an upstream that cannot be
// reached is answered with a JSON-RPC error carrying its id.
func TestHTTPSessionUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/mcp"
	srv.Close()
	_, c := rawSession(t, url)
	m, err := c.Call(context.Background(), "initialize", json.RawMessage(`{}`))
	if err != nil || m.Error == nil || !strings.Contains(string(m.Error), "could not be reached") {
		t.Fatalf("unreachable: %v %+v", err, m)
	}
}
