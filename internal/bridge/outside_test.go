package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestRequestsOutsideACall: what the upstream asks while no bridged call
// is in flight on its session (here during a tools/list, which cannot
// pause) the bridge answers itself: roots/list with the operator's
// roots, ping with an empty result, anything else with -32601.
func TestRequestsOutsideACall(t *testing.T) {
	var mu sync.Mutex
	answers := map[string]*rpc.Message{}
	got := make(chan struct{}, 3)
	kids := &scriptKids{
		answer: func(m *rpc.Message) any {
			switch m.Method {
			case "initialize":
				return map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "s", "version": "1"}}}
			case "tools/list": // asks first, then answers
				return []any{
					map[string]any{"jsonrpc": "2.0", "id": "r", "method": "roots/list"},
					map[string]any{"jsonrpc": "2.0", "id": "p", "method": "ping"},
					map[string]any{"jsonrpc": "2.0", "id": "e", "method": "elicitation/create", "params": map[string]any{"message": "?", "requestedSchema": map[string]any{"type": "object"}}},
					map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"tools": []any{}}},
				}
			}
			return map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}}
		},
		responded: func(m *rpc.Message) any {
			mu.Lock()
			answers[string(m.ID)] = m
			mu.Unlock()
			got <- struct{}{}
			return nil
		},
	}
	b := bridge.New(bridge.Options{Dial: kids.dial, Roots: []string{"file:///srv", "file:///data"}})
	t.Cleanup(func() { b.Close(context.Background()) })
	if r := straight(t, b, reqstate.Principal{}, "tools/list", map[string]any{}, nil); r.Error != nil {
		t.Fatalf("tools/list: %s", r.raw)
	}
	for range 3 {
		select {
		case <-got:
		case <-time.After(waitFor):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the upstream's requests were not all answered: %v", answers)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if r := answers[`"r"`]; r == nil || string(r.Result) != `{"roots":[{"uri":"file:///srv"},{"uri":"file:///data"}]}` {
		t.Errorf("roots/list: %+v, want the operator's roots", r)
	}
	if r := answers[`"p"`]; r == nil || string(r.Result) != `{}` {
		t.Errorf("ping: %+v, want an empty result", r)
	}
	if r := answers[`"e"`]; r == nil || r.Error == nil || !strings.Contains(string(r.Error), "-32601") {
		t.Errorf("an elicitation outside a call: %+v, want -32601", r)
	}
}

// TestBridgedSessionIdle: a bridged session nobody used for IdleTimeout
// is stopped, its child too; using it restarts the wait, and the next
// call after the stop opens a new one. On a fake clock
// (testing/synctest).
func TestBridgedSessionIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kids := &children{srv: sessionServer(nil)}
		b := bridge.New(bridge.Options{Dial: kids.dial, IdleTimeout: time.Minute})
		defer b.Close(context.Background())
		count := func(want string) {
			t.Helper()
			if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.text() != want {
				t.Fatalf("count: %s, want %s", r.raw, want)
			}
		}
		count("1")
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		count("2") // the same session, before its idle timeout
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		select {
		case <-kids.list()[0].closed:
			t.Fatal("a session used within IdleTimeout was stopped")
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-kids.list()[0].closed:
		default:
			t.Fatal("a session idle for IdleTimeout still runs")
		}
		if st := b.Stats(); st.Sessions != 0 {
			t.Fatalf("after the idle timeout: %+v", st)
		}
		count("1") // a new session
		if n := len(kids.list()); n != 2 {
			t.Fatalf("%d children started, want 2", n)
		}
	})
}

// TestDirectIgnoresClientsCancelled: a client's notifications/cancelled
// names ids of its own request, which the shared child never saw under
// them (the proxy cancels a client's request itself when it goes): it
// never reaches the child, where it could cancel another client's
// request that has that id on the connection.
func TestDirectIgnoresClientsCancelled(t *testing.T) {
	entered, cancelled := make(chan struct{}, 1), make(chan error, 1)
	var dials atomic.Int32
	ts := &taps{}
	d := bridge.NewDirect(ts.wrap(dialer(t, progressServer(entered, cancelled), &dials)), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	body, h := modernCall("hang", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://stdio.child/mcp", bytes.NewReader(body))
		req.Header = h
		if resp, err := d.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the call did not reach the child")
	}
	for id := range 8 { // whatever id the connection gave the call
		p := map[string]any{"requestId": id, "reason": "mine"}
		nb, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": p})
		if resp, b := sendRaw(t, context.Background(), d, reqstate.Principal{}, standardHeader("notifications/cancelled", p), nb); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("a client's notifications/cancelled: %d %s, want 202", resp.StatusCode, b)
		}
	}
	if n := len(ts.messages("notifications/cancelled")); n != 0 {
		t.Fatalf("%d of a client's notifications/cancelled reached the shared child", n)
	}
	select {
	case err := <-cancelled:
		t.Fatalf("another client's notification cancelled the call: %v", err)
	default:
	}
}

// TestOldClientProgressToItsRequest: a 2025-11-25 session's progress
// notification goes to the POST whose progress token it carries, not to
// the oldest request streaming.
func TestOldClientProgressToItsRequest(t *testing.T) {
	e := newOldEnv(t, "bridge", 0)
	mcp.AddTool(e.kids.srv, &mcp.Tool{Name: "progress", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, err
		})
	id := rawInit(t, e.px)
	hdr := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {id}}
	first := make(chan []byte, 1)
	go func() {
		_, b := postHdr(e.px, hdr, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{
			"name": "wait", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "tok-wait"}}})
		first <- b
	}()
	select {
	case <-e.entered:
	case <-time.After(waitFor):
		t.Fatal("the first call did not reach the child")
	}
	t.Cleanup(func() {
		for _, k := range e.kids.list() {
			k.kill()
		}
	})
	status, b := postHdr(e.px, hdr, map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{
		"name": "progress", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": "tok-progress"}}})
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"text":"done"`)) || !bytes.Contains(b, []byte(`"progressToken":"tok-progress"`)) {
		t.Fatalf("the second call: %d %s, want its progress with its result", status, b)
	}
}
