package proxy_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestInvalidArguments: arguments the hash refuses (not I-JSON: a repeated
// member name, a number beyond a double's precision) are the client's
// error, -32602 as in the error contract (docs/OPERATIONS.md), not a
// -32603 internal error that invites a retry; on a first call (the
// upstream's pause cannot be sealed) and on a resume alike.
func TestInvalidArguments(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	send := func(body string) reply {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		r.status, r.raw = resp.StatusCode, readAll(resp)
		decode(t, r.raw, &r)
		return r
	}
	r := send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask",` + meta + `,"arguments":{"n":12345678901234567890123}}}`)
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "I-JSON") {
		t.Errorf("first call with an inexact number: %s, want -32602 naming I-JSON", r.raw)
	}
	tok := pause(t, px.URL, "ask", map[string]any{"a": 1})
	r = send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask",` + meta + `,"arguments":{"a":1,"a":1},"requestState":"` + tok + `","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}}}`)
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "I-JSON") {
		t.Errorf("resume with a repeated argument name: %s, want -32602 naming I-JSON", r.raw)
	}
	if n := len(up.resumes()); n != 0 {
		t.Fatalf("%d resumes reached the upstream", n)
	}
}
