package bridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHTTPSessionForeignResponse pins issue 35 item 11 for the legacy HTTP
// sessions: the answer to one POST that carries a response to another id
// (a stray response on a kept-alive connection of the transport every
// session shares, where each session numbers its requests from 1) is never
// delivered, so it cannot complete another call waiting under that id;
// the request it came for fails with an error instead.
func TestHTTPSessionForeignResponse(t *testing.T) {
	second := make(chan json.RawMessage, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct{ Name string }
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		text := func(id json.RawMessage, s string) {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, id, s)
		}
		switch {
		case m.Method == "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`, m.ID)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Params.Name == "first":
			// Answered with the response of the other call in flight.
			select {
			case id := <-second:
				text(id, "stray")
			case <-time.After(10 * time.Second):
			}
		default:
			second <- m.ID
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			text(m.ID, "own")
		}
	}))
	defer srv.Close()
	_, c := rawSession(t, srv.URL+"/mcp")
	initialize(t, c)
	first, err := c.Start("tools/call", json.RawMessage(`{"name":"first"}`))
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Start("tools/call", json.RawMessage(`{"name":"second"}`))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-first.Response():
		if m == nil || m.Error == nil || !strings.Contains(string(m.Error), "not this request's") {
			t.Errorf("the call answered with another's response got %+v; want an error", m)
		}
	case m := <-other.Response():
		t.Fatalf("another request's response completed the call waiting under its id: %s", m.Result)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the first call after 10s")
	}
	close(release)
	select {
	case m := <-other.Response():
		if m == nil || !strings.Contains(string(m.Result), `"own"`) {
			t.Fatalf("the second call got %+v; want its own answer", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the second call after 10s")
	}
}
