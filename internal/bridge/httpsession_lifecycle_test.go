package bridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// scriptedHTTP is a hand-written Streamable HTTP upstream on 127.0.0.1:
// answer writes the response to each POST; it keeps the method and
// Mcp-Session-Id of every request it got. GET streams are refused (405).
type scriptedHTTP struct {
	url  string
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, session, rpcMethod string
}

func newScriptedHTTP(t *testing.T, answer func(w http.ResponseWriter, m *rpc.Message)) *scriptedHTTP {
	t.Helper()
	u := &scriptedHTTP{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m *rpc.Message
		if r.Method == http.MethodPost {
			m, _ = rpc.Parse(b)
		}
		sr := seenRequest{method: r.Method, session: r.Header.Get("Mcp-Session-Id")}
		if m != nil {
			sr.rpcMethod = m.Method
		}
		u.mu.Lock()
		u.seen = append(u.seen, sr)
		u.mu.Unlock()
		switch {
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case m == nil:
			w.WriteHeader(http.StatusBadRequest)
		case !m.IsRequest():
			w.WriteHeader(http.StatusAccepted)
		default:
			answer(w, m)
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

func (u *scriptedHTTP) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// writeJSON answers m with a JSON body of result (or error), and the
// session header sid when not "".
func writeJSON(w http.ResponseWriter, m *rpc.Message, status int, sid, member string, v any) {
	if sid != "" {
		w.Header().Set("Mcp-Session-Id", sid)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, member: v})
	w.Write(b)
}

var initResult = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "s", "version": "1"}}

// TestHTTPSessionIDFromInitialize: the session id is the one of the
// initialize's successful response: an initialize refused with a 4xx or
// 5xx that carries one gives none, a later response's id (even a second
// initialize's) never replaces or stands in for it, and Close deletes
// only a session the upstream gave.
func TestHTTPSessionIDFromInitialize(t *testing.T) {
	for _, c := range []struct {
		name    string
		initSID string // the header of the initialize's answer
		status  int    // of the initialize's answer
		want    string // the session id the later requests must carry
	}{
		{"stateless upstream", "", http.StatusOK, ""},
		{"a session", "good", http.StatusOK, "good"},
		{"initialize refused with 400", "refused", http.StatusBadRequest, ""},
		{"initialize refused with 500", "refused", http.StatusInternalServerError, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newScriptedHTTP(t, func(w http.ResponseWriter, m *rpc.Message) {
				switch {
				case m.Method == "initialize" && strings.Contains(string(m.Params), "again"):
					writeJSON(w, m, http.StatusOK, "second", "result", initResult)
				case m.Method == "initialize" && c.status == http.StatusOK:
					writeJSON(w, m, c.status, c.initSID, "result", initResult)
				case m.Method == "initialize":
					writeJSON(w, m, c.status, c.initSID, "error", map[string]any{"code": -32603, "message": "no"})
				default: // every other answer names a session of its own
					writeJSON(w, m, http.StatusOK, "late", "result", map[string]any{"tools": []any{}})
				}
			})
			s := bridge.NewHTTPSession(bridge.HTTPOptions{URL: u.url})
			conn := rpc.NewConn(s, func(*rpc.Message) {})
			ctx := context.Background()
			m, err := conn.Call(ctx, "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
			if err != nil || (m.Error == nil) != (c.status == http.StatusOK) {
				t.Fatalf("initialize: %v %+v", err, m)
			}
			if err := conn.Notify("notifications/initialized", nil); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if m, err := conn.Call(ctx, "tools/list", nil); err != nil || m.Error != nil {
					t.Fatalf("tools/list: %v %+v", err, m)
				}
			}
			if c.want != "" {
				// A second initialize in the session (the upstream's
				// answer names another) does not move it either.
				if m, err := conn.Call(ctx, "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"again","version":"1"}}`)); err != nil || m.Error != nil {
					t.Fatalf("a second initialize: %v %+v", err, m)
				}
				if m, err := conn.Call(ctx, "tools/list", nil); err != nil || m.Error != nil {
					t.Fatalf("tools/list: %v %+v", err, m)
				}
			}
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			var deletes int
			for i, r := range u.requests() {
				if r.rpcMethod == "initialize" {
					continue
				}
				if r.session != c.want {
					t.Errorf("request %d (%s %s) carried session %q, want %q", i, r.method, r.rpcMethod, r.session, c.want)
				}
				if r.method == http.MethodDelete {
					deletes++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[c.want != ""]; deletes != want {
				t.Errorf("%d DELETEs, want %d", deletes, want)
			}
		})
	}
}

// TestHTTPSessionMessageLimit: MaxMessage bounds a JSON answer exactly:
// one of MaxMessage bytes is delivered, one byte more fails its request
// with the limit's error, and the session goes on.
func TestHTTPSessionMessageLimit(t *testing.T) {
	const max = 256
	u := newScriptedHTTP(t, func(w http.ResponseWriter, m *rpc.Message) {
		if m.Method == "initialize" {
			writeJSON(w, m, http.StatusOK, "", "result", initResult)
			return
		}
		var p struct{ Size int }
		_ = json.Unmarshal(m.Params, &p)
		head := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"pad":"`
		tail := `"}}`
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, head+strings.Repeat("x", p.Size-len(head)-len(tail))+tail)
	})
	s := bridge.NewHTTPSession(bridge.HTTPOptions{URL: u.url, MaxMessage: max})
	t.Cleanup(func() { s.Close(context.Background()) })
	conn := rpc.NewConn(s, func(*rpc.Message) {})
	initialize(t, conn)
	for _, c := range []struct {
		size int
		ok   bool
	}{{max - 1, true}, {max, true}, {max + 1, false}, {max + 2, false}, {max, true}} {
		m, err := conn.Call(context.Background(), "tools/list", json.RawMessage(`{"size":`+strconv.Itoa(c.size)+`}`))
		switch {
		case err != nil:
			t.Fatalf("an answer of %d bytes: %v", c.size, err)
		case c.ok && (m.Error != nil || !strings.Contains(string(m.Result), "xxx")):
			t.Fatalf("an answer of %d bytes, within the limit of %d: %s %s", c.size, max, m.Result, m.Error)
		case !c.ok && (m.Error == nil || !strings.Contains(string(m.Error), "message limit")):
			t.Fatalf("an answer of %d bytes, beyond the limit of %d: %s %s, want the limit's error", c.size, max, m.Result, m.Error)
		}
	}
}
