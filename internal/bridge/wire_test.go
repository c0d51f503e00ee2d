package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestBridgedClientGoes: a client that goes away while its bridged call
// runs has the upstream's call cancelled (notifications/cancelled), and
// the session goes back to its caller's idle ones for the next call.
func TestBridgedClientGoes(t *testing.T) {
	entered, cancelled := make(chan struct{}, 1), make(chan error, 1)
	srv := sessionServer(nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			entered <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, nil, ctx.Err()
		})
	kids := &children{srv: srv}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "hang", "arguments": map[string]any{},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": allCaps}}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(bridge.WithCaller(ctx, user("alice")), http.MethodPost, "http://legacy.bridge/mcp", strings.NewReader(string(body)))
		req.Header.Set("Accept", "application/json")
		if resp, err := b.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the call did not reach the upstream")
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(waitFor):
		t.Fatal("the upstream's call was not cancelled after its client went away")
	}
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("the round trip of a client that went away did not return")
	}
	if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("alice's next call: %s", r.raw)
	}
	if n := len(kids.list()); n != 1 {
		t.Fatalf("%d sessions opened, want 1: the abandoned call's session was not reused", n)
	}
}

// TestResumeBoundToURI: a held resources/read is resumed only for the
// resource it was held for.
func TestResumeBoundToURI(t *testing.T) {
	srv := sessionServer(nil)
	for _, uri := range []string{"file:///a", "file:///b"} {
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Read?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"v": {Type: "string"}}}})
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "read " + req.Params.URI + " " + res.Action}}}, nil
		})
	}
	kids := &children{srv: srv}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	r := straight(t, b, reqstate.Principal{}, "resources/read", map[string]any{"uri": "file:///a"}, nil)
	k, _ := onlyKey(t, r)
	st := r.Result.RequestState
	ans := map[string]any{k: answer("x")}
	refusedAsReplay(t, straight(t, b, reqstate.Principal{}, "resources/read", map[string]any{"uri": "file:///b", "requestState": st, "inputResponses": ans}, nil), "a resume of file:///a's read for file:///b")
	r = straight(t, b, reqstate.Principal{}, "resources/read", map[string]any{"uri": "file:///a", "requestState": st, "inputResponses": ans}, nil)
	if r.Error != nil || !strings.Contains(string(r.raw), "read file:///a accept") {
		t.Fatalf("the resume for file:///a: %s", r.raw)
	}
}

// TestBridgeWireAnswers: what the bridge answers itself, as a 2026-07-28
// HTTP server would: 202 to a notification, -32022 (400, naming the
// version it serves) to a request without the 2026-07-28 _meta, -32601
// (404) to subscriptions/listen; none of them starts a session.
func TestBridgeWireAnswers(t *testing.T) {
	b, kids := newSessionBridge(t, bridge.Options{})
	send := func(msg map[string]any) (int, []byte) {
		body, _ := json.Marshal(msg)
		// Bounded: relayed upstream, a listen would stream until the end.
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		resp, raw := sendRaw(t, ctx, b, reqstate.Principal{}, nil, body)
		return resp.StatusCode, raw
	}
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	if status, raw := send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"_meta": meta, "progressToken": 1, "progress": 1}}); status != http.StatusAccepted {
		t.Errorf("a notification: %d %s, want 202", status, raw)
	}
	status, raw := send(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": map[string]any{}})
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `"code":-32022`) || !strings.Contains(string(raw), `"supported":["2026-07-28"]`) {
		t.Errorf("a request without the 2026-07-28 _meta: %d %s, want 400 and -32022", status, raw)
	}
	status, raw = send(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": map[string]any{"_meta": meta, "notifications": map[string]any{"toolsListChanged": true}}})
	if status != http.StatusNotFound || !strings.Contains(string(raw), `"code":-32601`) {
		t.Errorf("subscriptions/listen: %d %s, want 404 and -32601", status, raw)
	}
	if n := len(kids.list()); n != 0 {
		t.Errorf("%d sessions opened, want none", n)
	}
}
