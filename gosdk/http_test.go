package gosdk_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// legacyPost sends one 2025-11-25 POST to h in memory.
func legacyPost(h http.Handler, session, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		r.Header.Set("Mcp-Session-Id", session)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func liveSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// TestLegacySessionsExpire pins issue 9 item 1: sessions opened by
// anonymous initialize POSTs whose clients went away are closed after
// SessionTimeout, so the live count returns to zero. Time is synctest's.
func TestLegacySessionsExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		h := gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{SessionTimeout: time.Minute})
		const many = 300
		for i := range many {
			if w := legacyPost(h, "", legacyInit); w.Code != 200 || w.Header().Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize %d: HTTP %d %s", i, w.Code, w.Body)
			}
		}
		synctest.Wait()
		if n := liveSessions(s); n != many {
			t.Fatalf("%d live sessions after %d initializes", n, many)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := liveSessions(s); n != many {
			t.Fatalf("%d live sessions before the timeout, want %d", n, many)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := liveSessions(s); n != 0 {
			t.Fatalf("%d live sessions after the timeout, want 0", n)
		}
	})
}

// TestLegacySessionTimeoutDefault: the zero HTTPOptions expire sessions
// too (after DefaultSessionTimeout), so library users get the fix.
func TestLegacySessionTimeoutDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		h := gosdk.NewHTTPHandler(s, nil)
		for range 10 {
			legacyPost(h, "", legacyInit)
		}
		synctest.Wait()
		if n := liveSessions(s); n != 10 {
			t.Fatalf("%d live sessions", n)
		}
		time.Sleep(gosdk.DefaultSessionTimeout + time.Second)
		synctest.Wait()
		if n := liveSessions(s); n != 0 {
			t.Fatalf("%d live sessions after DefaultSessionTimeout", n)
		}
	})
}

// TestLegacySessionCap pins the cap of item 1: with MaxSessions N, the
// N+1th initialize gets HTTP 503 while the first N keep working; a
// session that ends (DELETE, or idle timeout) frees its slot.
func TestLegacySessionCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		const max = 5
		h := gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{SessionTimeout: time.Minute, MaxSessions: max})
		var ids []string
		for range max {
			w := legacyPost(h, "", legacyInit)
			if w.Code != 200 {
				t.Fatalf("initialize under the cap: HTTP %d %s", w.Code, w.Body)
			}
			ids = append(ids, w.Header().Get("Mcp-Session-Id"))
		}
		synctest.Wait()
		w := legacyPost(h, "", legacyInit)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "too many open sessions") {
			t.Fatalf("initialize over the cap: HTTP %d %s", w.Code, w.Body)
		}
		if n := liveSessions(s); n != max {
			t.Fatalf("%d live sessions, want %d", n, max)
		}
		// The first N still work.
		for _, id := range ids {
			legacyPost(h, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			w := legacyPost(h, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"result":{}`) {
				t.Fatalf("ping on session %s: HTTP %d %s", id, w.Code, w.Body)
			}
		}
		// Ending one session frees a slot.
		r := httptest.NewRequest("DELETE", "/mcp", nil)
		r.Header.Set("Mcp-Session-Id", ids[0])
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		dw := httptest.NewRecorder()
		h.ServeHTTP(dw, r)
		if dw.Code != http.StatusNoContent {
			t.Fatalf("DELETE: HTTP %d", dw.Code)
		}
		synctest.Wait()
		if w := legacyPost(h, "", legacyInit); w.Code != 200 {
			t.Fatalf("initialize after a DELETE: HTTP %d %s", w.Code, w.Body)
		}
		synctest.Wait()
		if w := legacyPost(h, "", legacyInit); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("cap not held after a DELETE: HTTP %d", w.Code)
		}
		// Requests that open no session take no slot for good.
		for range 3 * max {
			legacyPost(h, "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		// Idle timeout frees every slot.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := liveSessions(s); n != 0 {
			t.Fatalf("%d live sessions after the timeout", n)
		}
		for range max {
			if w := legacyPost(h, "", legacyInit); w.Code != 200 {
				t.Fatalf("initialize after the timeout: HTTP %d %s", w.Code, w.Body)
			}
		}
		time.Sleep(2 * time.Minute) // let them expire before the bubble ends
		synctest.Wait()
	})
}

// TestAllowedHosts pins issue 9 item 13 at the handler: on a loopback
// connection an allowed Host gets through go-sdk's DNS rebinding check,
// another host is still refused, and loopback names always pass.
func TestAllowedHosts(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	for _, tc := range []struct {
		allowed []string
		host    string
		want    int
	}{
		{nil, "mcp.internal", 403},
		{[]string{"mcp.internal"}, "mcp.internal", 200},
		{[]string{"MCP.internal"}, "mcp.internal:8080", 200},
		{[]string{"mcp.internal:9000"}, "mcp.internal:8080", 403},
		{[]string{"mcp.internal"}, "evil.example.com", 403},
		{[]string{"mcp.internal"}, "localhost:8080", 200},
		{nil, "127.0.0.1:8080", 200},
	} {
		h := gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{AllowedHosts: tc.allowed})
		srv := httptest.NewServer(h) // listens on 127.0.0.1
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		req.Host = tc.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("allowed %v, Host %q: HTTP %d, want %d (%s)", tc.allowed, tc.host, resp.StatusCode, tc.want, body)
		}
	}
	// On a non-loopback connection no Host check applies (as in go-sdk).
	h := gosdk.NewHTTPHandler(s, nil)
	r := httptest.NewRequest("DELETE", "/mcp", nil)
	r.Host = "mcp.internal"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 80}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code == http.StatusForbidden {
		t.Fatalf("non-loopback connection refused: %s", w.Body)
	}
}
