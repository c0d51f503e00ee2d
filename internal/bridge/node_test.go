package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mrtr-go/mrtr/internal/bridge"
)

// direct posts one 2026-07-28 request straight to b, as the proxy does
// once its guard has checked it, and returns the JSON-RPC answer.
func direct(t *testing.T, b *bridge.Bridge, params map[string]any) result {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": allCaps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, "http://legacy.bridge/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: b}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := result{raw: raw, status: resp.StatusCode}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("not JSON-RPC (%v): %s", err, raw)
	}
	return r
}

// TestHoldNamesItsNode: with Options.Node, a held call's state names the
// node (HolderOf reads it back), and a bridge of another node, or a state
// naming another node, finds no such call: the caller is told to start
// over, and the upstream's call is not touched.
func TestHoldNamesItsNode(t *testing.T) {
	var deleted, dials atomic.Int32
	srv := legacyServer(&deleted)
	a := bridge.New(bridge.Options{Dial: dialer(t, srv, &dials), Node: "node-A_1"})
	t.Cleanup(func() { a.Close(context.Background()) })
	b := bridge.New(bridge.Options{Dial: dialer(t, srv, &dials), Node: "nodeB"})
	t.Cleanup(func() { b.Close(context.Background()) })

	r := direct(t, a, tool("delete", map[string]any{"item": "a"}, "", nil))
	k, _ := onlyKey(t, r)
	st := r.Result.RequestState
	if node, ok := bridge.HolderOf(st); !ok || node != "node-A_1" {
		t.Fatalf("HolderOf(%q) = %q, %v; want node-A_1", st, node, ok)
	}
	// The state on another node, and the state made to name another node.
	for _, c := range []struct {
		on    *bridge.Bridge
		state string
	}{{b, st}, {a, strings.Replace(st, "node-A_1.", "nodeB.", 1)}, {a, strings.Replace(st, "node-A_1.", "", 1)}} {
		gone := direct(t, c.on, tool("delete", map[string]any{"item": "a"}, c.state, map[string]any{k: approve(true)}))
		if gone.Error == nil || gone.Error.Code != -32603 || !strings.Contains(gone.Error.Message, "start the call over") {
			t.Fatalf("state %q: want -32603 telling to start over, got %s", c.state, gone.raw)
		}
	}
	done := direct(t, a, tool("delete", map[string]any{"item": "a"}, st, map[string]any{k: approve(true)}))
	if done.text() != "deleted a" {
		t.Fatalf("resume on the holder: %s", done.raw)
	}
	if n := deleted.Load(); n != 1 {
		t.Fatalf("%d deletions, want 1", n)
	}
}

// TestHolderOf: only a bridge state naming a node has a holder.
func TestHolderOf(t *testing.T) {
	for st, want := range map[string]string{
		"bridge:n1.abcdef:1": "n1",
		"bridge:abcdef:1":    "",
		"bridge:.abcdef:1":   "",
		"bridge:n:1.abc:1":   "",
		"bridge:n1.abcdef":   "",
		"other:n1.abcdef:1":  "",
		"":                   "",
	} {
		node, ok := bridge.HolderOf(st)
		if node != want || ok != (want != "") {
			t.Errorf("HolderOf(%q) = %q, %v; want %q", st, node, ok, want)
		}
	}
}

// TestNodeChecked: a node with a separator in it is a programmer error.
func TestNodeChecked(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a node with a '.'")
		}
	}()
	bridge.New(bridge.Options{Dial: func(context.Context) (bridge.Upstream, error) { return nil, nil }, Node: "a.b"})
}
