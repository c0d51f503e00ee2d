package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/reqstate"
)

// stopBarrier holds every Close of its upstreams until n of them are
// under way at once. Close of a bridge that stops its children one after
// the other never gets there: the first Close gives up after waitFor,
// noting how many were under way, and the later ones do not wait.
type stopBarrier struct {
	n       int
	mu      sync.Mutex
	closing int
	all     chan struct{} // closed when n Closes are under way
	gaveUp  chan struct{} // closed when a Close gave up waiting for the others
	atOnce  int           // how many were under way then
	giveUp  sync.Once
}

func newStopBarrier(n int) *stopBarrier {
	return &stopBarrier{n: n, all: make(chan struct{}), gaveUp: make(chan struct{})}
}

// dial wraps the upstreams of dial so their Close waits at the barrier.
func (sb *stopBarrier) dial(dial func(context.Context) (bridge.Upstream, error)) func(context.Context) (bridge.Upstream, error) {
	return func(ctx context.Context) (bridge.Upstream, error) {
		up, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return &barrierUpstream{Upstream: up, sb: sb}, nil
	}
}

func (sb *stopBarrier) arrive() {
	sb.mu.Lock()
	sb.closing++
	if sb.closing == sb.n {
		close(sb.all)
	}
	sb.mu.Unlock()
	select {
	case <-sb.all:
	case <-sb.gaveUp:
	case <-time.After(waitFor):
		sb.giveUp.Do(func() {
			sb.mu.Lock()
			sb.atOnce = sb.closing
			sb.mu.Unlock()
			close(sb.gaveUp)
		})
	}
}

func (sb *stopBarrier) check(t *testing.T) {
	t.Helper()
	select {
	case <-sb.gaveUp:
		t.Errorf("Close stopped the children one after the other: %d of %d were being stopped at once", sb.atOnce, sb.n)
	default:
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closing != sb.n {
		t.Errorf("Close stopped %d children, want %d", sb.closing, sb.n)
	}
}

// barrierUpstream is an upstream whose first Close waits at sb (a later
// one, the bridge making sure, does not count again).
type barrierUpstream struct {
	bridge.Upstream
	sb   *stopBarrier
	once sync.Once
}

func (u *barrierUpstream) Close(ctx context.Context) error {
	u.once.Do(u.sb.arrive)
	return u.Upstream.Close(ctx)
}

// oldClientSession opens a 2025-11-25 client session through tr.
func oldClientSession(t *testing.T, tr http.RoundTripper) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
	if resp, b := sendRaw(t, context.Background(), tr, reqstate.Principal{}, nil, body); resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
}

// TestCloseStopsChildrenAtOnce: Close stops every child of a Bridge at
// once (idle sessions, held calls, 2025-11-25 client sessions), not one
// after the other: a child that does not exit when its stdin closes costs
// its grace periods (2 s, then 2 s more after SIGTERM), and the proxy's
// shutdown with a dozen held calls of server-everything took 16 s.
func TestCloseStopsChildrenAtOnce(t *testing.T) {
	const held = 4
	kids := &children{srv: sessionServer(nil)}
	sb := newStopBarrier(held + 2)
	b := bridge.New(bridge.Options{Dial: sb.dial(kids.dial)})
	if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("count: %s", r.raw)
	}
	for i := range held {
		onlyKey(t, straight(t, b, user(fmt.Sprint("bob", i)), "tools/call", tool("ask", nil, "", nil), nil))
	}
	oldClientSession(t, b)
	if st := b.Stats(); st.Sessions != held+2 || st.Holds != held {
		t.Fatalf("before Close: %+v, want %d sessions and %d holds", st, held+2, held)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sb.check(t)
	for _, c := range kids.list() {
		stoppedNow(t, c, "a child after Close returned")
	}
}

// TestDirectCloseStopsChildrenAtOnce: a Direct's Close stops its shared
// child and its 2025-11-25 client sessions' children at once too.
func TestDirectCloseStopsChildrenAtOnce(t *testing.T) {
	const n = 3
	kids := &children{srv: oldServer(make(chan struct{}, 1))}
	sb := newStopBarrier(n + 1)
	d := bridge.NewDirectWith(bridge.DirectOptions{Dial: sb.dial(kids.dial)})
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/list"}}
	if resp, b := sendRaw(t, context.Background(), d, reqstate.Principal{}, h, body); !bytes.Contains(b, []byte(`"count"`)) {
		t.Fatalf("tools/list through the shared child: %d %s", resp.StatusCode, b)
	}
	for range n {
		oldClientSession(t, d)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sb.check(t)
	for _, c := range kids.list() {
		stoppedNow(t, c, "a child after Close returned")
	}
}
