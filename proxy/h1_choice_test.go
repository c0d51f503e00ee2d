package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestUpstreamTransportChoice pins item 2's switch: Options.UpstreamTransport
// picks *http.Transport or the lean one; lean is refused where the socket
// cannot be peeked at, and auto is std there.
func TestUpstreamTransportChoice(t *testing.T) {
	for _, c := range []struct {
		kind      TransportKind
		supported bool
		lean      bool
		err       bool
	}{
		{TransportAuto, true, true, false},
		{TransportAuto, false, false, false},
		{TransportStd, true, false, false},
		{TransportStd, false, false, false},
		{TransportLean, true, true, false},
		{TransportLean, false, false, true},
		{"fast", true, false, true},
	} {
		lean, err := leanTransport(c.kind, c.supported)
		if lean != c.lean || (err != nil) != c.err {
			t.Errorf("leanTransport(%q, %v) = %v, %v; want %v, error %v", c.kind, c.supported, lean, err, c.lean, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "std") {
			t.Errorf("leanTransport(%q, %v): %q names no way out", c.kind, c.supported, err)
		}
	}
	g := testGuard(t)
	want := map[TransportKind]string{TransportAuto: "*http.Transport", TransportStd: "*http.Transport", TransportLean: "*http.Transport"}
	if LeanTransportSupported {
		want[TransportAuto], want[TransportLean] = "*proxy.h1Transport", "*proxy.h1Transport"
	}
	for kind, w := range want {
		h, err := New(Options{Upstream: "http://127.0.0.1:8080/mcp", Guard: g, UpstreamTransport: kind})
		if kind == TransportLean && !LeanTransportSupported {
			if err == nil {
				t.Error("lean built where the socket cannot be peeked at")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := typeName(h.tr.(*watchedTransport).next); got != w {
			t.Errorf("UpstreamTransport %q: %s, want %s", kind, got, w)
		}
	}
	if _, err := New(Options{Upstream: "http://127.0.0.1:8080/mcp", Guard: g, UpstreamTransport: "fast"}); err == nil {
		t.Error("an unknown UpstreamTransport was taken")
	}
	// A transport of the caller's is used as given.
	h, err := New(Options{Upstream: "http://127.0.0.1:8080/mcp", Guard: g, UpstreamTransport: TransportLean, Transport: roundTripFunc(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := typeName(h.tr.(*watchedTransport).next); got != "proxy.roundTripFunc" {
		t.Errorf("with Transport set: %s", got)
	}
}

func testGuard(t *testing.T) *mrtr.Guard {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return mrtr.New(reqstate.New(ring, nil), nil)
}

// TestProxyStrayResponse is item 2's reproduction through New: alice's
// tools/list is answered, then the upstream sends a second response on
// the idle connection; bob's tools/list must get his own answer, never
// that one. (Before the fix, where connAlive could not peek, bob got
// alice's.)
func TestProxyStrayResponse(t *testing.T) {
	if !LeanTransportSupported {
		t.Skip("no lean transport here")
	}
	read, sent := make(chan struct{}), make(chan struct{})
	conns := new(atomic.Int32)
	up := strayServer(t, false, read, sent, conns)
	h, err := New(Options{Upstream: up, Guard: testGuard(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.tr.(*watchedTransport).next.(*h1Transport).CloseIdleConnections)
	for i, who := range []string{"1", "2"} { // alice, bob
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-N", who)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "reply "+who {
			t.Fatalf("caller %s got %q, want %q", who, b, "reply "+who)
		}
		if i == 0 {
			read <- struct{}{}
			wait(t, sent, "stray response sent")
		}
	}
}
