package bridge_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// lastUp keeps the upstream a dial opened last, so that a tool can end
// its own child, as a server that exits on a caller's input does.
type lastUp struct {
	mu  sync.Mutex
	cur bridge.Upstream
}

func (l *lastUp) wrap(d func(context.Context) (bridge.Upstream, error)) func(context.Context) (bridge.Upstream, error) {
	return func(ctx context.Context) (bridge.Upstream, error) {
		up, err := d(ctx)
		if err == nil {
			l.mu.Lock()
			l.cur = up
			l.mu.Unlock()
		}
		return up, err
	}
}

// addCrash gives srv a "crash" tool whose call ends the child it runs in
// (the one l opened last) before it answers.
func addCrash(srv *mcp.Server, l *lastUp) {
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			l.mu.Lock()
			up := l.cur
			l.mu.Unlock()
			go up.Close(context.Background())
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
}

// TestDirectCallerCrashNoCrashLoop (issue 35, item 3): requests of one
// caller that make the shared child exit fail themselves (a JSON-RPC
// error with their id), and never put the Direct into its crash loop: a
// fresh child answered the proxy's own ping before any caller's request
// reached it, so it started. Other callers keep working, and readiness
// stays OK. Before, each such child ended before answering anything, and
// four of them in a row made every caller get "keeps failing to start".
func TestDirectCallerCrashNoCrashLoop(t *testing.T) {
	var runs, dials atomic.Int32
	srv := modernServer(&runs)
	l := &lastUp{}
	addCrash(srv, l)
	d := bridge.NewDirectWith(bridge.DirectOptions{CrashLoop: bridge.DefaultCrashLoop, RestartBackoff: time.Minute, MaxRestartBackoff: time.Minute,
		Dial: l.wrap(dialer(t, srv, &dials))})
	t.Cleanup(func() { d.Close(context.Background()) })
	for i := range 4 {
		body, h := modernCall("crash", nil)
		resp, raw := sendRaw(t, context.Background(), d, user("mallory"), h, body)
		if r := decodeResult(t, resp, raw); r.Error == nil || !strings.Contains(string(raw), "exited") {
			t.Fatalf("crash %d: %s, want the call's own error", i, raw)
		}
		if err := d.CrashLoop(context.Background()); err != nil {
			t.Fatalf("after crash %d: CrashLoop %v", i, err)
		}
		if err := d.Ready(context.Background()); err != nil {
			t.Fatalf("after crash %d: Ready %v", i, err)
		}
	}
	body, h := modernCall("confirm", nil)
	resp, raw := sendRaw(t, context.Background(), d, user("alice"), h, body)
	if r := decodeResult(t, resp, raw); r.Error != nil || r.Result.ResultType != "input_required" {
		t.Fatalf("another caller after the crashes: %s", raw)
	}
	if n := dials.Load(); n < 5 {
		t.Fatalf("%d children started, want one per crash and one more", n)
	}
}

// TestBridgeCallerCrashNoCrashLoop (issue 35, item 3): on a Bridge too, a
// child that a caller's call makes exit is that call's failure, not a
// failed start: the child answered the proxy's initialize first.
func TestBridgeCallerCrashNoCrashLoop(t *testing.T) {
	srv := oldServer(nil)
	l := &lastUp{}
	addCrash(srv, l)
	kids := &children{srv: srv}
	b := bridge.New(bridge.Options{CrashLoop: bridge.DefaultCrashLoop, RestartBackoff: time.Minute, MaxRestartBackoff: time.Minute,
		Dial: l.wrap(kids.dial)})
	t.Cleanup(func() { b.Close(context.Background()) })
	for i := range 4 {
		r := straight(t, b, user("mallory"), "tools/call", map[string]any{"name": "crash", "arguments": map[string]any{}}, nil)
		if r.Error == nil {
			t.Fatalf("crash %d: %s, want the call's own error", i, r.raw)
		}
		if err := b.CrashLoop(context.Background()); err != nil {
			t.Fatalf("after crash %d: CrashLoop %v", i, err)
		}
		if err := b.Ready(context.Background()); err != nil {
			t.Fatalf("after crash %d: Ready %v", i, err)
		}
	}
	if r := straight(t, b, user("alice"), "tools/call", map[string]any{"name": "count", "arguments": map[string]any{}}, nil); r.Error != nil || r.text() != "1" {
		t.Fatalf("another caller after the crashes: %s", r.raw)
	}
}

// TestDirectSilentChildFailsToStart: a fresh shared child that does not
// answer the proxy's ping within StartTimeout is stopped, and failed to
// start; the request that waited for it gets an error (the start's, or,
// when that failure already began the crash loop, the crash loop's).
func TestDirectSilentChildFailsToStart(t *testing.T) {
	kids := &scriptKids{answer: func(*rpc.Message) any { return nil }}
	d := bridge.NewDirectWith(bridge.DirectOptions{Dial: kids.dial, StartTimeout: 100 * time.Millisecond, CrashLoop: 1, RestartBackoff: time.Minute, MaxRestartBackoff: time.Minute})
	t.Cleanup(func() { d.Close(context.Background()) })
	body, h := modernCall("confirm", nil)
	resp, raw := sendRaw(t, context.Background(), d, user("alice"), h, body)
	if r := decodeResult(t, resp, raw); r.Error == nil || !(strings.Contains(string(raw), "could not be started") || strings.Contains(string(raw), "keeps failing to start")) {
		t.Fatalf("a request to a child that never answers: %s", raw)
	}
	stopped(t, kids.list()[0], "the silent child")
	eventually(t, "a crash loop", func() bool { return d.CrashLoop(context.Background()) != nil })
}
