package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRootsGateLearns: the first connection of an upstream that never
// asks for roots waits RootsWait, and later ones do not wait at all; one
// that asks is waited for, and then given RootsSettle to apply the answer.
// Without operator roots nothing waits.
func TestRootsGateLearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(true, time.Second, 50*time.Millisecond, slog.New(slog.DiscardHandler))
		never := make(chan struct{})
		start := time.Now()
		g.await(context.Background(), never)
		if d := time.Since(start); d != time.Second {
			t.Fatalf("first wait %v, want RootsWait (1s)", d)
		}
		start = time.Now()
		g.await(context.Background(), never)
		if d := time.Since(start); d != 0 {
			t.Fatalf("an upstream seen not to ask was waited for %v", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(true, time.Second, 50*time.Millisecond, slog.New(slog.DiscardHandler))
		answered := make(chan struct{})
		go func() { time.Sleep(200 * time.Millisecond); close(answered) }()
		start := time.Now()
		g.await(context.Background(), answered)
		if d := time.Since(start); d != 250*time.Millisecond {
			t.Fatalf("waited %v, want the answer (200ms) and the settle (50ms)", d)
		}
		// Known to ask: a slow one is waited for beyond RootsWait.
		late := make(chan struct{})
		go func() { time.Sleep(3 * time.Second); close(late) }()
		start = time.Now()
		g.await(context.Background(), late)
		if d := time.Since(start); d != 3*time.Second+50*time.Millisecond {
			t.Fatalf("waited %v for an upstream known to ask", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newRootsGate(false, time.Second, 50*time.Millisecond, nil)
		start := time.Now()
		g.await(context.Background(), make(chan struct{}))
		if d := time.Since(start); d != 0 {
			t.Fatalf("without operator roots the gate waited %v", d)
		}
	})
}

// recordRT is a Passthrough that keeps the bodies it is given and answers
// 202.
type recordRT struct{ bodies [][]byte }

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	r.bodies = append(r.bodies, b)
	return &http.Response{StatusCode: http.StatusAccepted, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// TestPassthroughWithoutRoots: a 2025-11-25 client's initialize passed
// through to an HTTP upstream loses its roots capability (the proxy
// cannot answer for it there, so the upstream must not ask the client),
// everything else of it intact; with RootsFromClient it passes untouched.
func TestPassthroughWithoutRoots(t *testing.T) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{}},"clientInfo":{"name":"old","version":"1"}}}`
	for _, fromClient := range []bool{false, true} {
		rt := &recordRT{}
		b := New(Options{Dial: func(context.Context) (Upstream, error) { return nil, errors.New("no") }, Passthrough: rt, RootsFromClient: fromClient})
		req, _ := http.NewRequest(http.MethodPost, "http://up/mcp", strings.NewReader(init))
		resp, err := b.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(rt.bodies) != 1 {
			t.Fatalf("%d bodies passed", len(rt.bodies))
		}
		var got struct {
			Params struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
				ClientInfo   struct{ Name string }      `json:"clientInfo"`
			} `json:"params"`
		}
		if err := json.Unmarshal(rt.bodies[0], &got); err != nil {
			t.Fatal(err)
		}
		_, roots := got.Params.Capabilities["roots"]
		if roots != fromClient || got.Params.Capabilities["elicitation"] == nil || got.Params.ClientInfo.Name != "old" {
			t.Fatalf("RootsFromClient %v: the upstream got %s", fromClient, rt.bodies[0])
		}
	}
	declared := withRootsCapability([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"old","version":"1"}}}`))
	if !strings.Contains(string(declared), `"capabilities":{"roots":{}}`) || !strings.Contains(string(declared), `"clientInfo"`) {
		t.Fatalf("roots declared: %s", declared)
	}
	if again := withRootsCapability(declared); string(again) != string(declared) {
		t.Fatalf("declared twice: %s", again)
	}
	for _, keep := range []string{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, `not json`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`} {
		if got := withoutRootsCapability([]byte(keep)); string(got) != keep {
			t.Fatalf("%s became %s", keep, got)
		}
		if keep != init && !strings.Contains(keep, "initialize") {
			if got := withRootsCapability([]byte(keep)); string(got) != keep {
				t.Fatalf("%s became %s", keep, got)
			}
		}
	}
}
