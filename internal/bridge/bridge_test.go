package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// legacyServer is go-sdk's server, spoken to in 2025-11-25 (the bridge
// initializes every session with that version): its tools ask for input
// the legacy way, with requests in the middle of the call.
func legacyServer(deleted *atomic.Int32) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1.0.0"}, nil)
	type item struct {
		Item string `json:"item"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delete"}, func(ctx context.Context, req *mcp.CallToolRequest, in item) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete " + in.Item + "?", RequestedSchema: &jsonschema.Schema{
			Type: "object", Properties: map[string]*jsonschema.Schema{"approve": {Type: "boolean"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		if res.Action != "accept" || res.Content["approve"] != true {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + in.Item}}}, nil, nil
		}
		deleted.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Item}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "survey"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		var got []string
		for _, q := range []string{"name", "colour"} {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your " + q + "?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"v": {Type: "string"}},
			}})
			if err != nil {
				return nil, nil, err
			}
			got = append(got, fmt.Sprint(res.Content["v"]))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(got, ",")}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said " + res.Content.(*mcp.TextContent).Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots " + strings.Join(uris, " ")}}}, nil, nil
	})
	return s
}

// pipeUpstream runs a server session over in-process pipes, framed as on
// stdio.
type pipeUpstream struct {
	*rpc.Lines
	close func()
}

func (p *pipeUpstream) Close(context.Context) error { p.close(); return nil }

// dialer starts a fresh session of srv for every Dial, counting them.
func dialer(t *testing.T, srv *mcp.Server, dials *atomic.Int32) func(context.Context) (bridge.Upstream, error) {
	return func(ctx context.Context) (bridge.Upstream, error) {
		dials.Add(1)
		cr, sw := io.Pipe() // server -> bridge
		sr, cw := io.Pipe() // bridge -> server
		sctx, cancel := context.WithCancel(context.Background())
		ss, err := srv.Connect(sctx, &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		return &pipeUpstream{Lines: rpc.NewLines(cr, cw, 0), close: func() {
			// As a child's pipes close when it exits: the session's
			// pending calls fail, and it ends.
			cw.Close()
			sw.Close()
			cr.Close()
			sr.Close()
			cancel()
			ss.Close()
		}}, nil
	}
}

type env struct {
	px      string
	b       *bridge.Bridge
	dials   atomic.Int32
	deleted atomic.Int32
}

func newEnv(t *testing.T, bo *bridge.Options) *env {
	e := &env{}
	o := bridge.Options{}
	if bo != nil {
		o = *bo
	}
	o.Dial = dialer(t, legacyServer(&e.deleted), &e.dials)
	e.b = bridge.New(o)
	t.Cleanup(func() { e.b.Close(context.Background()) })
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{
		Upstream:  "http://legacy.bridge/mcp",
		Guard:     mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}),
		Transport: e.b,
		Principal: testPrincipal,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.px = srv.URL + "/mcp"
	return e
}

// testPrincipal is the proxy's Principal in these tests: the issuer
// "test" and the subject the X-Test-User header names; anonymous without
// one.
func testPrincipal(r *http.Request) (reqstate.Principal, error) {
	if u := r.Header.Get("X-Test-User"); u != "" {
		return reqstate.Principal{Issuer: "test", Subject: u}, nil
	}
	return reqstate.Principal{}, nil
}

type result struct {
	raw    []byte
	status int
	Result struct {
		ResultType    string                     `json:"resultType"`
		RequestState  string                     `json:"requestState"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		Content       []struct{ Text string }    `json:"content"`
		Tools         []struct{ Name string }    `json:"tools"`
		Supported     []string                   `json:"supportedVersions"`
	} `json:"result"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (r result) text() string {
	if len(r.Result.Content) == 0 {
		return ""
	}
	return r.Result.Content[0].Text
}

var allCaps = map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{}}

func call(t *testing.T, e *env, user, method string, params map[string]any, caps map[string]any) result {
	t.Helper()
	hdr := http.Header{}
	if user != "" {
		hdr.Set("X-Test-User", user)
	}
	return callWith(t, e, hdr, method, params, caps)
}

// callWith is call with the client's own extra headers.
func callWith(t *testing.T, e *env, hdr http.Header, method string, params map[string]any, caps map[string]any) result {
	t.Helper()
	if caps == nil {
		caps = allCaps
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, e.px, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := result{raw: raw, status: resp.StatusCode}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"id":9`) {
				msg = []byte(d)
			}
		}
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("not JSON-RPC (%v): %s", err, raw)
	}
	return r
}

func tool(name string, args map[string]any, state string, answers map[string]any) map[string]any {
	p := map[string]any{"name": name, "arguments": args}
	if state != "" {
		p["requestState"] = state
	}
	if answers != nil {
		p["inputResponses"] = answers
	}
	return p
}

func onlyKey(t *testing.T, r result) (string, json.RawMessage) {
	t.Helper()
	if r.Result.ResultType != "input_required" || len(r.Result.InputRequests) != 1 {
		t.Fatalf("want input_required with one input request, got %s", r.raw)
	}
	for k, v := range r.Result.InputRequests {
		return k, v
	}
	return "", nil
}

func approve(v bool) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"approve": v}}
}

// TestBridgedElicitation: a legacy server's mid-call elicitation becomes
// a sealed input_required round, and the answer reaches it on the retry.
func TestBridgedElicitation(t *testing.T) {
	e := newEnv(t, nil)
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
	// The same token again: refused before the bridge sees it.
	again := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, tok, map[string]any{k: approve(true)}), nil)
	if again.Error == nil || !strings.Contains(string(again.Error.Data), "replayed") {
		t.Fatalf("replay: %s", again.raw)
	}
	if n := e.deleted.Load(); n != 1 {
		t.Fatalf("%d deletions", n)
	}
	// Changed arguments on the retry: refused by the guard.
	r = call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "b"}, "", nil), nil)
	k, _ = onlyKey(t, r)
	moved := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "c"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
	if moved.Error == nil || !strings.Contains(string(moved.Error.Data), "arguments_changed") {
		t.Fatalf("changed arguments: %s", moved.raw)
	}
	if st := e.b.Stats(); st.Sessions != 2 && st.Sessions != 1 {
		t.Fatalf("sessions %+v", st)
	}
}

// TestBridgedRounds: two elicitations in one call are two rounds; a
// missing answer asks again.
func TestBridgedRounds(t *testing.T) {
	e := newEnv(t, nil)
	r := call(t, e, "", "tools/call", tool("survey", nil, "", nil), nil)
	k1, _ := onlyKey(t, r)
	r = call(t, e, "", "tools/call", tool("survey", nil, r.Result.RequestState, map[string]any{"not-asked": map[string]any{"action": "accept", "content": map[string]any{"v": "x"}}}), nil)
	if k, _ := onlyKey(t, r); k != k1 {
		t.Fatalf("a missing answer asked %q, want %q again", k, k1)
	}
	r = call(t, e, "", "tools/call", tool("survey", nil, r.Result.RequestState, map[string]any{k1: map[string]any{"action": "accept", "content": map[string]any{"v": "Ada"}}}), nil)
	k2, ir := onlyKey(t, r)
	if k2 == k1 || !strings.Contains(string(ir), "colour") {
		t.Fatalf("second round %s", r.raw)
	}
	r = call(t, e, "", "tools/call", tool("survey", nil, r.Result.RequestState, map[string]any{k2: map[string]any{"action": "accept", "content": map[string]any{"v": "green"}}}), nil)
	if r.text() != "Ada,green" {
		t.Fatalf("final %s", r.raw)
	}
}

// TestBridgedSamplingAndRoots: sampling requests are input requests too,
// and so are roots requests with RootsFromClient; a client that did not
// declare sampling gets -32021.
func TestBridgedSamplingAndRoots(t *testing.T) {
	e := newEnv(t, &bridge.Options{Roots: []string{"file:///srv"}, RootsFromClient: true, RootsWait: time.Millisecond})
	r := call(t, e, "", "tools/call", tool("sample", nil, "", nil), nil)
	k, ir := onlyKey(t, r)
	if !strings.Contains(string(ir), "sampling/createMessage") {
		t.Fatalf("input request %s", ir)
	}
	r = call(t, e, "", "tools/call", tool("sample", nil, r.Result.RequestState, map[string]any{k: map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "hello"}}}), nil)
	if r.text() != "model said hello" {
		t.Fatalf("sampling: %s", r.raw)
	}
	r = call(t, e, "", "tools/call", tool("roots", nil, "", nil), nil)
	k, _ = onlyKey(t, r)
	r = call(t, e, "", "tools/call", tool("roots", nil, r.Result.RequestState, map[string]any{k: map[string]any{"roots": []any{map[string]any{"uri": "file:///work"}}}}), nil)
	if r.text() != "roots file:///work" {
		t.Fatalf("roots: %s", r.raw)
	}
	r = call(t, e, "", "tools/call", tool("sample", nil, "", nil), map[string]any{"elicitation": map[string]any{}})
	if r.Error == nil || r.Error.Code != -32021 || r.status != http.StatusBadRequest || !strings.Contains(string(r.Error.Data), "sampling") {
		t.Fatalf("undeclared sampling: %d %s", r.status, r.raw)
	}
	// A client without roots: the bridge answers roots/list itself with
	// the operator's roots, and the call goes on.
	r = call(t, e, "", "tools/call", tool("roots", nil, "", nil), map[string]any{"elicitation": map[string]any{}})
	if r.text() != "roots file:///srv" {
		t.Fatalf("roots without the client's capability: %s", r.raw)
	}
	// The session is usable again afterwards.
	r = call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "z"}, "", nil), nil)
	onlyKey(t, r)
}

// TestBridgedLists: server/discover, tools/list come from the legacy
// server in 2026-07-28 shape.
func TestBridgedLists(t *testing.T) {
	e := newEnv(t, nil)
	r := call(t, e, "", "server/discover", map[string]any{}, nil)
	if r.Result.ResultType != "complete" || len(r.Result.Supported) != 1 || r.Result.Supported[0] != "2026-07-28" || !strings.Contains(string(r.raw), `/serverInfo":{"name":"legacy"`) {
		t.Fatalf("discover: %s", r.raw)
	}
	r = call(t, e, "", "tools/list", map[string]any{}, nil)
	if r.Result.ResultType != "complete" || len(r.Result.Tools) != 4 || !strings.Contains(string(r.raw), `"cacheScope":`) {
		t.Fatalf("tools/list: %s", r.raw)
	}
}

// TestBridgeIsolation: callers never share a session; one caller's
// paused call does not block another, and 8 concurrent flows each get
// their own answer.
func TestBridgeIsolation(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", i%3)
			item := fmt.Sprintf("item-%d", i)
			r := call(t, e, user, "tools/call", tool("delete", map[string]any{"item": item}, "", nil), nil)
			if r.Result.ResultType != "input_required" {
				errs <- fmt.Errorf("%s: %s", item, r.raw)
				return
			}
			var k string
			for k = range r.Result.InputRequests {
			}
			done := call(t, e, user, "tools/call", tool("delete", map[string]any{"item": item}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
			if done.text() != "deleted "+item {
				errs <- fmt.Errorf("%s: %s", item, done.raw)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Another caller's token does not open.
	r := call(t, e, "alice", "tools/call", tool("delete", map[string]any{"item": "x"}, "", nil), nil)
	k, _ := onlyKey(t, r)
	stolen := call(t, e, "mallory", "tools/call", tool("delete", map[string]any{"item": "x"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
	if stolen.Error == nil || !strings.Contains(string(stolen.Error.Data), "invalid") {
		t.Fatalf("another caller's token: %s", stolen.raw)
	}
}

// recordingDialer is dialer, keeping every upstream it opened.
type recordingDialer struct {
	mu  sync.Mutex
	ups []*pipeUpstream
}

func (r *recordingDialer) wrap(d func(context.Context) (bridge.Upstream, error)) func(context.Context) (bridge.Upstream, error) {
	return func(ctx context.Context) (bridge.Upstream, error) {
		up, err := d(ctx)
		if err == nil {
			r.mu.Lock()
			r.ups = append(r.ups, up.(*pipeUpstream))
			r.mu.Unlock()
		}
		return up, err
	}
}

func (r *recordingDialer) last() *pipeUpstream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ups[len(r.ups)-1]
}

// newEnvWith is newEnv with a server of the test's own.
func newEnvWith(t *testing.T, srv *mcp.Server, o bridge.Options, rec *recordingDialer) *env {
	e := &env{}
	o.Dial = rec.wrap(dialer(t, srv, &e.dials))
	e.b = bridge.New(o)
	t.Cleanup(func() { e.b.Close(context.Background()) })
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	h, err := proxy.New(proxy.Options{Upstream: "http://legacy.bridge/mcp", Transport: e.b,
		Guard:     mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}),
		Principal: testPrincipal})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	e.px = s.URL + "/mcp"
	return e
}

// TestHoldExpires: a held call nobody resumes is cancelled upstream when
// its hold expires, its session goes back to the pool, and the late
// resume is told to start over.
func TestHoldExpires(t *testing.T) {
	cancelled := make(chan error, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "?", RequestedSchema: &jsonschema.Schema{Type: "object"}})
		cancelled <- err
		return nil, nil, err
	})
	rec := &recordingDialer{}
	// The hold's lifetime is what is tested: whatever the machine's speed,
	// it ends, and nothing else waits on it.
	e := newEnvWith(t, srv, bridge.Options{HoldTTL: 50 * time.Millisecond}, rec)
	r := call(t, e, "", "tools/call", tool("ask", nil, "", nil), nil)
	k, _ := onlyKey(t, r)
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("the upstream's elicitation returned without an error after the hold expired")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream's call was not cancelled when its hold expired")
	}
	if st := e.b.Stats(); st.Holds != 0 || st.Idle != 1 {
		t.Fatalf("after expiry: %+v, want no hold and the session idle", st)
	}
	late := call(t, e, "", "tools/call", tool("ask", nil, r.Result.RequestState, map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{}}}), nil)
	if late.Error == nil || !strings.Contains(late.Error.Message, "start the call over") {
		t.Fatalf("late resume: %s", late.raw)
	}
}

// TestChildLostWhileHeld: the upstream dies while a call waits for its
// answer: the resume gets an error, and the next call works on a new
// session.
func TestChildLostWhileHeld(t *testing.T) {
	var deleted atomic.Int32
	rec := &recordingDialer{}
	e := newEnvWith(t, legacyServer(&deleted), bridge.Options{}, rec)
	r := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil)
	k, _ := onlyKey(t, r)
	rec.last().close()
	lost := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
	if lost.Error == nil || lost.Error.Code != -32603 {
		t.Fatalf("resume after the upstream died: %s", lost.raw)
	}
	r = call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "b"}, "", nil), nil)
	k, _ = onlyKey(t, r)
	done := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "b"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil)
	if done.text() != "deleted b" || e.dials.Load() != 2 {
		t.Fatalf("the next call: %s (%d sessions opened)", done.raw, e.dials.Load())
	}
}

// TestBridgeBounds: beyond --max-procs and --max-holds a new call gets a
// clear error naming the flag; the calls already held go on.
func TestBridgeBounds(t *testing.T) {
	var deleted atomic.Int32
	rec := &recordingDialer{}
	e := newEnvWith(t, legacyServer(&deleted), bridge.Options{MaxSessions: 1}, rec)
	r := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil)
	k, _ := onlyKey(t, r)
	busy := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "b"}, "", nil), nil)
	if busy.Error == nil || !strings.Contains(busy.Error.Message, "--max-procs") {
		t.Fatalf("beyond --max-procs: %s", busy.raw)
	}
	if done := call(t, e, "", "tools/call", tool("delete", map[string]any{"item": "a"}, r.Result.RequestState, map[string]any{k: approve(true)}), nil); done.text() != "deleted a" {
		t.Fatalf("the held call: %s", done.raw)
	}
	e2 := newEnvWith(t, legacyServer(&deleted), bridge.Options{MaxHolds: 1}, &recordingDialer{})
	onlyKey(t, call(t, e2, "", "tools/call", tool("delete", map[string]any{"item": "a"}, "", nil), nil))
	full := call(t, e2, "", "tools/call", tool("delete", map[string]any{"item": "b"}, "", nil), nil)
	if full.Error == nil || !strings.Contains(full.Error.Message, "--max-holds") {
		t.Fatalf("beyond --max-holds: %s", full.raw)
	}
}
