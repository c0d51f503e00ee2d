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

// TestSSELoneCR: an event stream's lines may end in CR alone (the SSE
// grammar allows CR, LF and CRLF). The proxy must split such a stream into
// events as the client does: the final input_required response is sealed,
// and the upstream's own requestState never reaches the client.
func TestSSELoneCR(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage            `json:"id"`
			Params map[string]json.RawMessage `json:"params"`
		}
		json.Unmarshal(body, &msg)
		res := map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": "upstream-secret"}
		if _, ok := msg.Params["requestState"]; ok {
			res = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}}
		}
		note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": "p", "progress": 1}})
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res})
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\rdata: %s\r\revent: message\rdata: %s\r\r", note, b)
	}))
	t.Cleanup(up.Close)
	px := startProxy(t, up.URL+"/mcp", nil, nil, nil)

	r := post(t, px.URL, callReq{name: "ask"})
	if strings.Contains(string(r.raw), "upstream-secret") {
		t.Fatalf("the upstream's own requestState reached the client: %q", r.raw)
	}
	if r.resultType() != "input_required" || r.state() == "" {
		t.Fatalf("first call: %q", r.raw)
	}
	r2 := post(t, px.URL, callReq{id: 2, name: "ask", state: ptr(r.state()), responses: confirmed()})
	if r2.err != nil || r2.text() != "done" {
		t.Fatalf("resume: %q", r2.raw)
	}
}
