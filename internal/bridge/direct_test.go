package bridge_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// modernServer is go-sdk's server spoken to in 2026-07-28 over stdio
// framing: it pauses with input_required and keeps its own plain state.
func modernServer(runs *atomic.Int32) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "confirm", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			if req.Params.RequestState == "" {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{
					Message: "Sure?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"yes": {Type: "boolean"}}},
				}}, RequestState: "plain-" + fmt.Sprint(in["n"])}, nil, nil
			}
			runs.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + req.Params.RequestState}}}, nil, nil
		})
	return s
}

// TestDirectSharedChild: many clients share one modern upstream
// connection; each gets its own answer, the proxy seals the upstream's
// plain state and refuses a replay.
func TestDirectSharedChild(t *testing.T) {
	var runs, dials atomic.Int32
	d := bridge.NewDirect(dialer(t, modernServer(&runs), &dials), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	h, err := proxy.New(proxy.Options{Upstream: "http://stdio.child/mcp", Transport: d,
		Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{px: srv.URL + "/mcp"}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := map[string]any{"n": i}
			r := directCall(t, e, "tools/call", tool("confirm", args, "", nil))
			if r.Result.ResultType != "input_required" || strings.Contains(r.Result.RequestState, "plain") {
				t.Errorf("first call %d: %s", i, r.raw)
				return
			}
			done := directCall(t, e, "tools/call", tool("confirm", args, r.Result.RequestState, map[string]any{"ok": map[string]any{"action": "accept", "content": map[string]any{"yes": true}}}))
			if want := fmt.Sprintf("done plain-%d", i); done.text() != want {
				t.Errorf("resume %d: got %s, want %q", i, done.raw, want)
			}
			again := directCall(t, e, "tools/call", tool("confirm", args, r.Result.RequestState, map[string]any{"ok": map[string]any{"action": "accept", "content": map[string]any{"yes": true}}}))
			if again.Error == nil || !strings.Contains(string(again.Error.Data), "replayed") {
				t.Errorf("replay %d: %s", i, again.raw)
			}
		}()
	}
	wg.Wait()
	if n := runs.Load(); n != 16 {
		t.Fatalf("%d resumes ran, want 16", n)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d children started, want 1 shared", n)
	}
	r := directCall(t, e, "tools/list", map[string]any{})
	var names []string
	for _, tl := range r.Result.Tools {
		names = append(names, tl.Name)
	}
	if len(names) != 1 || names[0] != "confirm" {
		t.Fatalf("tools/list: %s", r.raw)
	}
}
