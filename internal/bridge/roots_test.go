package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// fsLikeServer behaves as server-filesystem does with roots: started on
// the directory of its command line, it asks a client that declared roots
// for them as soon as it is initialized, and some time later (its own
// checks of each directory) replaces its allowed directories with the
// answer, for every later call of the session. Its "dirs" tool tells the
// directories a call would be allowed in; asked counts the roots/list
// requests it sent.
func fsLikeServer(cmdline string, apply time.Duration, asked *atomic.Int32) *mcp.Server {
	var mu sync.Mutex
	dirs := map[*mcp.ServerSession]string{}
	current := func(ss *mcp.ServerSession) string {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := dirs[ss]; ok {
			return d
		}
		return cmdline
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fs-like", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			ss := req.Session
			if p := ss.InitializeParams(); p == nil || p.Capabilities == nil || p.Capabilities.RootsV2 == nil {
				return
			}
			go func() {
				asked.Add(1)
				res, err := ss.ListRoots(context.Background(), nil)
				if err != nil || len(res.Roots) == 0 {
					return // as server-filesystem: no roots, its own directories
				}
				time.Sleep(apply)
				var uris []string
				for _, r := range res.Roots {
					uris = append(uris, r.URI)
				}
				mu.Lock()
				dirs[ss] = strings.Join(uris, " ")
				mu.Unlock()
			}()
		},
	})
	mcp.AddTool(s, &mcp.Tool{Name: "dirs", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dirs " + current(req.Session)}}}, nil, nil
		})
	// "list-roots" asks for the roots during the call, as servers that
	// read them per call do.
	mcp.AddTool(s, &mcp.Tool{Name: "list-roots", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			asked.Add(1)
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

var rootsCaps = map[string]any{"roots": map[string]any{}, "elicitation": map[string]any{}}

// TestRootsBelongToTheOperator: a caller that declared the roots
// capability is never asked for roots by default: the upstream's
// roots/list, on a fresh child right after initialize and in the middle
// of a call, gets the operator's roots (or none), and no round pauses for
// it. A caller's answer would replace what the upstream may touch, for it
// and for every later caller of the session.
func TestRootsBelongToTheOperator(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roots []string
		want  string
	}{
		{"no roots", nil, ""},
		{"operator roots", []string{"file:///srv/data"}, "file:///srv/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			e := newEnvWith(t, fsLikeServer("/cmdline", 0, &asked), bridge.Options{Roots: tc.roots, RootsWait: 200 * time.Millisecond}, &recordingDialer{})
			r := call(t, e, "", "tools/call", tool("list-roots", nil, "", nil), rootsCaps)
			if r.Error != nil || r.Result.RequestState != "" {
				t.Fatalf("the caller was asked for roots (or the call failed): %s", r.raw)
			}
			if got := r.text(); got != "roots "+tc.want {
				t.Fatalf("the upstream got %q, want the operator's roots %q", got, tc.want)
			}
			if asked.Load() < 2 {
				t.Fatalf("the upstream asked for roots %d times, want after initialize and in the call", asked.Load())
			}
		})
	}
}

// TestRootsFromClientOptIn: with RootsFromClient, a roots/list in the
// middle of a call is the caller's input request, answered in a sealed
// round; a caller without the roots capability still gets the operator's.
func TestRootsFromClientOptIn(t *testing.T) {
	var asked atomic.Int32
	e := newEnvWith(t, fsLikeServer("/cmdline", 0, &asked), bridge.Options{Roots: []string{"file:///srv/data"}, RootsFromClient: true, RootsWait: 200 * time.Millisecond}, &recordingDialer{})
	r := call(t, e, "", "tools/call", tool("list-roots", nil, "", nil), rootsCaps)
	k, ir := onlyKey(t, r)
	if !strings.Contains(string(ir), "roots/list") {
		t.Fatalf("input request %s", ir)
	}
	r = call(t, e, "", "tools/call", tool("list-roots", nil, r.Result.RequestState, map[string]any{k: map[string]any{"roots": []any{map[string]any{"uri": "file:///home/me"}}}}), rootsCaps)
	if r.text() != "roots file:///home/me" {
		t.Fatalf("the caller's roots: %s", r.raw)
	}
	r = call(t, e, "", "tools/call", tool("list-roots", nil, "", nil), map[string]any{"elicitation": map[string]any{}})
	if r.text() != "roots file:///srv/data" {
		t.Fatalf("without the capability: %s", r.raw)
	}
}

// TestRootsReachAFreshChildFirst: with --roots, the first call on a fresh
// child sees them, although the upstream asks for them only once
// initialized and applies the answer later: the session waits for the
// upstream's roots/list and the answer to settle before its first call.
// Once an upstream was seen not to ask, no later session waits.
func TestRootsReachAFreshChildFirst(t *testing.T) {
	var asked atomic.Int32
	e := newEnvWith(t, fsLikeServer("/cmdline", 10*time.Millisecond, &asked), bridge.Options{Roots: []string{"file:///srv/data"}}, &recordingDialer{})
	for i := range 3 { // each caller a fresh child
		user := []string{"", "alice", "bob"}[i]
		r := call(t, e, user, "tools/call", tool("dirs", nil, "", nil), map[string]any{"elicitation": map[string]any{}})
		if got := r.text(); got != "dirs file:///srv/data" {
			t.Fatalf("call %d on a fresh child: the upstream was on %q, want the operator's roots", i, got)
		}
	}
	if n := e.dials.Load(); n != 3 {
		t.Fatalf("%d children, want 3", n)
	}
}

// TestOldClientRootsBelongToTheOperator: a 2025-11-25 client in front of
// a command upstream has a child of its own, and still never gets the
// child's roots/list: the proxy answers it with the operator's roots
// (declaring the capability upstream when the operator gave roots), the
// first call after initialize sees them, and an answer the client makes
// up for a request the child sent (or will send) is refused rather than
// taken as the roots.
func TestOldClientRootsBelongToTheOperator(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			var asked atomic.Int32
			kids := &children{srv: fsLikeServer("/cmdline", 10*time.Millisecond, &asked)}
			var tr http.RoundTripper
			roots := []string{"file:///srv/data"}
			switch kind {
			case "bridge":
				b := bridge.New(bridge.Options{Dial: kids.dial, Roots: roots})
				t.Cleanup(func() { b.Close(context.Background()) })
				tr = b
			case "direct":
				d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, Roots: roots})
				t.Cleanup(func() { d.Close(context.Background()) })
				tr = d
			}
			px := serveProxy(t, tr)
			// A client that offers roots of its own, and would answer
			// roots/list with "/".
			client := mcp.NewClient(&mcp.Implementation{Name: "old-client", Version: "1"}, nil)
			client.AddRoots(&mcp.Root{URI: "file:///"})
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: px}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := toolText(t, cs, "dirs"); got != "dirs file:///srv/data" {
				t.Fatalf("first call after initialize: the child is on %q, want the operator's roots", got)
			}
			if got := toolText(t, cs, "list-roots"); got != "roots file:///srv/data" {
				t.Fatalf("a roots/list in a call: %q, want the operator's roots", got)
			}
			// A forged answer to the child's next request id.
			for _, id := range []any{0, 1, 2, 3, "1"} {
				st, body := rawPost(t, px, cs.ID(), map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"roots": []any{map[string]any{"uri": "file:///"}}}})
				if st != http.StatusBadRequest {
					t.Fatalf("an answer to a request the child never sent the client (id %v): %d %s, want 400", id, st, body)
				}
			}
			if got := toolText(t, cs, "dirs"); got != "dirs file:///srv/data" {
				t.Fatalf("after forged answers: the child is on %q", got)
			}
		})
	}
}

// serveProxy serves the proxy in front of tr, returning its /mcp URL.
func serveProxy(t *testing.T, tr http.RoundTripper) string {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(proxy.Options{Upstream: "http://stdio.upstream/mcp", Transport: tr,
		Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestOldClientRootsWithoutInitialized (issue 35, item 1): a 2025-11-25
// client that never sends notifications/initialized, or sends its call
// before or alongside it, still finds the child on the operator's roots
// from its first call: the proxy initializes the child itself when a
// request comes first, and every request of a fresh session waits for
// the roots. Before, such a call reached a child that never asked for
// roots and served the directories of its command line.
func TestOldClientRootsWithoutInitialized(t *testing.T) {
	dirs := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "dirs", "arguments": map[string]any{}}}
	initialized := map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}
	for _, kind := range kinds {
		for _, order := range []string{"skipped", "after the call", "alongside"} {
			t.Run(kind+"/"+order, func(t *testing.T) {
				var asked atomic.Int32
				kids := &children{srv: fsLikeServer("/cmdline", 10*time.Millisecond, &asked)}
				var tr http.RoundTripper
				roots := []string{"file:///srv/data"}
				switch kind {
				case "bridge":
					b := bridge.New(bridge.Options{Dial: kids.dial, Roots: roots})
					t.Cleanup(func() { b.Close(context.Background()) })
					tr = b
				case "direct":
					d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, Roots: roots})
					t.Cleanup(func() { d.Close(context.Background()) })
					tr = d
				}
				px := serveProxy(t, tr)
				resp := postInitialize(t, px)
				resp.Body.Close()
				id := resp.Header.Get("Mcp-Session-Id")
				if resp.StatusCode != http.StatusOK || id == "" {
					t.Fatalf("initialize: %d", resp.StatusCode)
				}
				var notified chan int
				if order == "alongside" {
					notified = make(chan int, 1)
					go func() {
						// Not rawPost: no Fatal outside the test's goroutine.
						b, _ := json.Marshal(initialized)
						req, _ := http.NewRequest(http.MethodPost, px, bytes.NewReader(b))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Accept", "application/json, text/event-stream")
						req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
						req.Header.Set("Mcp-Session-Id", id)
						st := -1
						if resp, err := http.DefaultClient.Do(req); err == nil {
							st = resp.StatusCode
							resp.Body.Close()
						}
						notified <- st
					}()
					t.Cleanup(func() { <-notified })
				}
				for i := range 2 {
					if st, body := rawPost(t, px, id, dirs); st != http.StatusOK || !strings.Contains(string(body), "dirs file:///srv/data") {
						t.Fatalf("call %d: %d %s, want the child on the operator's roots", i, st, body)
					}
				}
				switch order {
				case "after the call":
					if st, body := rawPost(t, px, id, initialized); st != http.StatusAccepted {
						t.Fatalf("a late initialized: %d %s", st, body)
					}
				case "alongside":
					st := <-notified
					notified <- st // for the cleanup
					if st != http.StatusAccepted {
						t.Fatalf("initialized alongside the call: %d", st)
					}
				}
				if n := asked.Load(); n != 1 {
					t.Fatalf("the child asked for roots %d times, want once (one notifications/initialized)", n)
				}
			})
		}
	}
}
