package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// children starts a fresh session of a go-sdk server for every Dial, as a
// command upstream starts a process, and keeps them so a test can see
// which were stopped, or end one as if its process died.
type children struct {
	srv     *mcp.Server
	mu      sync.Mutex
	started []*child
}

type child struct {
	*rpc.Lines
	once   sync.Once
	kill   func()
	closed chan struct{}
}

func (c *child) Close(context.Context) error {
	c.once.Do(func() { c.kill(); close(c.closed) })
	return nil
}

func (cs *children) dial(ctx context.Context) (bridge.Upstream, error) {
	cr, sw := io.Pipe() // server -> proxy
	sr, cw := io.Pipe() // proxy -> server
	sctx, cancel := context.WithCancel(context.Background())
	ss, err := cs.srv.Connect(sctx, &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &child{Lines: rpc.NewLines(cr, cw, 0), closed: make(chan struct{}), kill: func() {
		cw.Close()
		sw.Close()
		cr.Close()
		sr.Close()
		cancel()
		ss.Close()
	}}
	cs.mu.Lock()
	cs.started = append(cs.started, c)
	cs.mu.Unlock()
	return c, nil
}

func (cs *children) list() []*child {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]*child(nil), cs.started...)
}

// oldServer is what a 2025-11-25 client finds behind the proxy: a tool
// that elicits mid-call, a counter kept per server session (so per child),
// and a tool that waits until the test lets it go or its child dies.
func oldServer(entered chan<- struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "old", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}},
			}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hello %v", res.Content["name"])}}}, nil, nil
		})
	var mu sync.Mutex
	counts := map[*mcp.ServerSession]int{}
	mcp.AddTool(s, &mcp.Tool{Name: "count", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			counts[req.Session]++
			n := counts[req.Session]
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return s
}

type oldEnv struct {
	px      string
	kids    *children
	entered chan struct{}
	stats   func() bridge.Stats // of the Bridge or Direct
}

// newOldEnv puts the proxy, with a Bridge or a Direct as its transport,
// in front of oldServer children.
func newOldEnv(t *testing.T, kind string, maxProcs int) *oldEnv {
	t.Helper()
	e := &oldEnv{entered: make(chan struct{}, 4)}
	e.kids = &children{srv: oldServer(e.entered)}
	var tr http.RoundTripper
	switch kind {
	case "bridge":
		b := bridge.New(bridge.Options{Dial: e.kids.dial, MaxSessions: maxProcs})
		t.Cleanup(func() { b.Close(context.Background()) })
		tr, e.stats = b, b.Stats
	case "direct":
		d := bridge.NewDirectWith(bridge.DirectOptions{Dial: e.kids.dial, MaxProcs: maxProcs})
		t.Cleanup(func() { d.Close(context.Background()) })
		tr, e.stats = d, d.Stats
	}
	e.px = serveProxy(t, tr)
	return e
}

// connect opens a session of go-sdk v1.8.0's client pinned to 2025-11-25.
func (e *oldEnv) connect(t *testing.T, name string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "old-client", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.px}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Fatalf("negotiated %q", got)
	}
	if cs.ID() == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	return cs
}

func toolText(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: %+v", name, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// rawPost posts one message on a session and returns the status and body.
func rawPost(t *testing.T, url, session string, msg map[string]any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

var kinds = []string{"bridge", "direct"}

// TestOldClientElicitation: a 2025-11-25 client completes a tool call with
// a mid-call elicitation through the proxy in front of a command
// upstream, in a child of its own that no one else (not the era probe,
// not another client) used.
func TestOldClientElicitation(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			cs := e.connect(t, "Ada")
			defer cs.Close()
			if got := toolText(t, cs, "greet"); got != "hello Ada" {
				t.Fatalf("greet: %q", got)
			}
			if got := toolText(t, cs, "greet"); got != "hello Ada" {
				t.Fatalf("greet again: %q", got)
			}
			if n := len(e.kids.list()); n != 1 {
				t.Fatalf("%d children started, want 1", n)
			}
		})
	}
}

// TestOldClientIsolation: two clients get two sessions and two children;
// what one does is not seen by the other.
func TestOldClientIsolation(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			a := e.connect(t, "Ada")
			defer a.Close()
			b := e.connect(t, "Bob")
			defer b.Close()
			if a.ID() == b.ID() {
				t.Fatalf("both clients got session %q", a.ID())
			}
			for _, want := range []string{"1", "2"} {
				if got := toolText(t, a, "count"); got != want {
					t.Fatalf("a's count %q, want %q", got, want)
				}
			}
			if got := toolText(t, b, "count"); got != "1" {
				t.Fatalf("b's count %q, want 1: b shares a's child", got)
			}
			var wg sync.WaitGroup
			for _, c := range []struct {
				cs   *mcp.ClientSession
				name string
			}{{a, "Ada"}, {b, "Bob"}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
					if err != nil {
						t.Errorf("greet %s: %v", c.name, err)
						return
					}
					if got := res.Content[0].(*mcp.TextContent).Text; got != "hello "+c.name {
						t.Errorf("greet %s: %q", c.name, got)
					}
				}()
			}
			wg.Wait()
			if n := len(e.kids.list()); n != 2 {
				t.Fatalf("%d children started, want 2", n)
			}
		})
	}
}

// TestOldClientDelete: DELETE stops the session's child; its id is 404
// afterwards.
func TestOldClientDelete(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			cs := e.connect(t, "Ada")
			id := cs.ID()
			toolText(t, cs, "count")
			if err := cs.Close(); err != nil { // sends DELETE
				t.Fatal(err)
			}
			kids := e.kids.list()
			if len(kids) != 1 {
				t.Fatalf("%d children", len(kids))
			}
			select {
			case <-kids[0].closed:
			default:
				t.Fatal("the child still runs after DELETE")
			}
			status, body := rawPost(t, e.px, id, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
			if status != http.StatusNotFound {
				t.Fatalf("after DELETE: %d %s, want 404", status, body)
			}
		})
	}
}

// TestOldClientChildDies: a child that exits ends its session: the call
// it had in flight gets a JSON-RPC error with its own id, and the session
// id is 404 afterwards, so the client re-initializes (and gets a new
// child).
func TestOldClientChildDies(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			cs := e.connect(t, "Ada")
			defer cs.Close()
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
				errc <- err
			}()
			<-e.entered
			e.kids.list()[0].kill() // as if the process died
			err := <-errc
			if err == nil || !strings.Contains(err.Error(), "upstream ended during the call") {
				t.Fatalf("the call in flight got %v, want the upstream's end", err)
			}
			status, body := rawPost(t, e.px, cs.ID(), map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
			if status != http.StatusNotFound {
				t.Fatalf("after the child died: %d %s, want 404", status, body)
			}
			again := e.connect(t, "Ada")
			defer again.Close()
			if got := toolText(t, again, "greet"); got != "hello Ada" {
				t.Fatalf("greet in the new session: %q", got)
			}
		})
	}
}

// TestOldClientBound: the children count against --max-procs; an idle
// session is stopped to make room, a busy one is not, and an initialize
// beyond the bound gets a JSON-RPC error saying so. On a Bridge the bound
// is shared with its own sessions.
func TestOldClientBound(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 1)
			a := e.connect(t, "Ada")
			defer a.Close()
			toolText(t, a, "count")
			b := e.connect(t, "Bob") // a is idle: stopped to make room
			defer b.Close()
			if status, body := rawPost(t, e.px, a.ID(), map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}); status != http.StatusNotFound {
				t.Fatalf("the evicted session: %d %s, want 404", status, body)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := b.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
				errc <- err
			}()
			<-e.entered
			// go-sdk's Close waits for the call in flight: on a failure
			// below, its child ends first.
			defer e.kids.list()[1].Close(context.Background())
			status, body := rawPost(t, e.px, "", map[string]any{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "c", "version": "1"},
			}})
			if status != http.StatusOK || !bytes.Contains(body, []byte(`"id":5`)) || !bytes.Contains(body, []byte("--max-procs")) {
				t.Fatalf("initialize beyond the bound: %d %s", status, body)
			}
			if kind == "bridge" { // a 2026-07-28 call needs a child too
				status, body := rawPost(t, e.px, "", map[string]any{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{
					"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{},
				}}})
				if !bytes.Contains(body, []byte(`"id":6`)) || !bytes.Contains(body, []byte("--max-procs")) {
					t.Fatalf("a bridged call beyond the bound: %d %s", status, body)
				}
			}
			e.kids.list()[1].kill()
			<-errc
			if n := len(e.kids.list()); n != 2 {
				t.Fatalf("%d children started, want 2", n)
			}
		})
	}
}

// TestOldClientIdle: a session nobody used for IdleTimeout is stopped
// (its child too) and its id is 404 afterwards; using it restarts the
// wait. On a fake clock (testing/synctest).
func TestOldClientIdle(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				kids := &children{srv: oldServer(make(chan struct{}, 1))}
				var tr http.RoundTripper
				if kind == "bridge" {
					b := bridge.New(bridge.Options{Dial: kids.dial, IdleTimeout: time.Minute})
					defer b.Close(context.Background())
					tr = b
				} else {
					d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, IdleTimeout: time.Minute})
					defer d.Close(context.Background())
					tr = d
				}
				post := func(session string, msg map[string]any) (int, string) {
					body, _ := json.Marshal(msg)
					req, _ := http.NewRequest(http.MethodPost, "http://stdio.upstream/mcp", bytes.NewReader(body))
					req.Header.Set("Accept", "application/json, text/event-stream")
					if session != "" {
						req.Header.Set("Mcp-Session-Id", session)
					}
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					_, _ = io.Copy(io.Discard, resp.Body)
					return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
				}
				status, id := post("", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
					"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "c", "version": "1"},
				}})
				if status != http.StatusOK || id == "" {
					t.Fatalf("initialize: %d, session %q", status, id)
				}
				if status, _ := post(id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); status != http.StatusAccepted {
					t.Fatalf("initialized: %d", status)
				}
				list := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
				time.Sleep(time.Minute - time.Second)
				synctest.Wait()
				if status, _ := post(id, list); status != http.StatusOK {
					t.Fatalf("before the idle timeout: %d", status)
				}
				time.Sleep(time.Minute - time.Second) // counted from the last use
				synctest.Wait()
				if status, _ := post(id, list); status != http.StatusOK {
					t.Fatalf("used again before the idle timeout: %d", status)
				}
				time.Sleep(time.Minute + time.Second)
				synctest.Wait()
				select {
				case <-kids.list()[0].closed:
				default:
					t.Fatal("the idle session's child still runs")
				}
				if status, _ := post(id, list); status != http.StatusNotFound {
					t.Fatalf("after the idle timeout: %d, want 404", status)
				}
			})
		})
	}
}

// TestOldClientGetStream: what the child sends outside any request (here
// notifications/tools/list_changed) reaches the client on its GET stream.
func TestOldClientGetStream(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			changed := make(chan struct{}, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "old-client", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default:
					}
				},
			})
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.px}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			toolText(t, cs, "count") // the session is live, its GET stream open
			mcp.AddTool(e.kids.srv, &mcp.Tool{Name: "late", InputSchema: &jsonschema.Schema{Type: "object"}},
				func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
				})
			<-changed
			if got := toolText(t, cs, "late"); got != "late" {
				t.Fatalf("late: %q", got)
			}
		})
	}
}

// TestOldClientSessionBoundToCaller: a 2025-11-25 session id is its
// initializing caller's: another caller presenting it gets the 404 of an
// unknown session, never the other's child.
func TestOldClientSessionBoundToCaller(t *testing.T) {
	e := newEnv(t, nil)
	post := func(user, session, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.px, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Test-User", user)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post("alice", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	post("alice", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if resp, body := post("mallory", sid, list); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another caller with alice's session id: %d %s", resp.StatusCode, body)
	}
	if resp, body := post("alice", sid, list); resp.StatusCode != 200 || !strings.Contains(body, `"delete"`) {
		t.Fatalf("alice with her session id: %d %s", resp.StatusCode, body)
	}
}

// postInitialize posts a raw 2025-11-25 initialize and returns the
// response with its body unread.
func postInitialize(t *testing.T, url string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawInit opens a 2025-11-25 session with raw POSTs (no GET stream) and
// returns its id.
func rawInit(t *testing.T, url string) string {
	t.Helper()
	resp := postInitialize(t, url)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	if status, b := rawPost(t, url, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, b)
	}
	return id
}

// TestOldClientStats: the children of 2025-11-25 client sessions count
// in Stats (mrtr_upstream_processes and _idle), on a Bridge and on a
// Direct, where the shared child of 2026-07-28 clients counts too.
func TestOldClientStats(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			t.Cleanup(func() { // first: a call left waiting ends with its child
				for _, k := range e.kids.list() {
					k.kill()
				}
			})
			if st := e.stats(); st != (bridge.Stats{}) {
				t.Fatalf("before any session: %+v", st)
			}
			a, b := rawInit(t, e.px), rawInit(t, e.px)
			if status, body := rawPost(t, e.px, a, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "count", "arguments": map[string]any{}}}); status != http.StatusOK || !bytes.Contains(body, []byte(`"1"`)) {
				t.Fatalf("count: %d %s", status, body)
			}
			if st := e.stats(); st.Sessions != 2 || st.Idle != 2 {
				t.Fatalf("two idle client sessions: %+v", st)
			}
			done := make(chan struct{})
			go func() { // a call in flight on b's child until it dies
				defer close(done)
				postHdr(e.px, http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {b}},
					map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": "wait", "arguments": map[string]any{}}})
			}()
			<-e.entered
			if st := e.stats(); st.Sessions != 2 || st.Idle != 1 {
				t.Fatalf("one client session busy: %+v", st)
			}
			if kind == "direct" { // a 2026-07-28 call starts the shared child
				status, body := postHdr(e.px, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"count"}},
					map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{"name": "count", "arguments": map[string]any{},
						"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "m", "version": "1"}}}})
				if status != http.StatusOK || !bytes.Contains(body, []byte(`"1"`)) {
					t.Fatalf("modern count: %d %s", status, body)
				}
				if st := e.stats(); st.Sessions != 3 || st.Idle != 1 {
					t.Fatalf("with the shared child: %+v", st)
				}
			}
			for _, k := range e.kids.list() {
				k.kill()
			}
			<-done
		})
	}
}

// postHdr sends one message with the given headers; status 0 when it could
// not be sent.
func postHdr(url string, hdr http.Header, msg map[string]any) (int, []byte) {
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestOldClientSessionUsableAtOnce: the session an initialize creates
// exists by the time its response reaches the client, so the client's
// next message (notifications/initialized, sent as soon as the response's
// header is read) never finds it missing.
func TestOldClientSessionUsableAtOnce(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := newOldEnv(t, kind, 0)
			for i := range 50 {
				resp := postInitialize(t, e.px)
				id := resp.Header.Get("Mcp-Session-Id")
				// The response's header is all the client needs: it speaks
				// before reading the body, as early as a client can.
				status, b := rawPost(t, e.px, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if id == "" || status != http.StatusAccepted {
					t.Fatalf("round %d: session %q: notifications/initialized got %d %s, want 202", i, id, status, b)
				}
				if status, b := rawPost(t, e.px, id, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}); status != http.StatusOK {
					t.Fatalf("round %d: tools/list got %d %s", i, status, b)
				}
				req, _ := http.NewRequest(http.MethodDelete, e.px, nil)
				req.Header.Set("Mcp-Session-Id", id)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				del, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				del.Body.Close()
				if del.StatusCode != http.StatusNoContent {
					t.Fatalf("round %d: DELETE got %d, want 204", i, del.StatusCode)
				}
			}
		})
	}
}
