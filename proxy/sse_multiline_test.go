package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSSEMultiLineData: an event's data may span several data lines (an
// upstream that pretty-prints, or any JSON with CR/LF whitespace). The
// final response the proxy rewrites or relays must reach the client as
// the same JSON, every line of it a data line, whether it pauses (sealed)
// or completes.
func TestSSEMultiLineData(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage            `json:"id"`
			Params map[string]json.RawMessage `json:"params"`
		}
		json.Unmarshal(body, &msg)
		res := map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": upState}
		if _, ok := msg.Params["requestState"]; ok {
			res = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}}
		}
		b, _ := json.MarshalIndent(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res}, "", "  ")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\n")
		for _, l := range strings.Split(string(b), "\n") {
			fmt.Fprintf(w, "data: %s\n", l)
		}
		fmt.Fprintf(w, "\n")
	}))
	t.Cleanup(up.Close)
	px := startProxy(t, up.URL+"/mcp", nil, nil, nil)

	check := func(r reply) reply {
		t.Helper()
		if !strings.HasPrefix(r.ctype, "text/event-stream") {
			t.Fatalf("content type %q", r.ctype)
		}
		for _, line := range strings.FieldsFunc(string(r.raw), func(c rune) bool { return c == '\n' || c == '\r' }) {
			if !strings.HasPrefix(line, "data:") && !strings.HasPrefix(line, "event:") && !strings.HasPrefix(line, "id:") {
				t.Fatalf("the client's stream has a line that is no event field: %q in %q", line, r.raw)
			}
		}
		return r
	}
	r := check(post(t, px.URL, callReq{name: "ask"}))
	if r.resultType() != "input_required" || r.state() == "" || r.state() == upState {
		t.Fatalf("first call: %s", r.raw)
	}
	r2 := check(post(t, px.URL, callReq{id: 2, name: "ask", state: ptr(r.state()), responses: confirmed()}))
	if r2.err != nil || r2.text() != "done" {
		t.Fatalf("resume: %s", r2.raw)
	}
}
