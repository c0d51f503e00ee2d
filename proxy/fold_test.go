package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCaseFoldedNames: encoding/json matches member names to struct fields
// case-insensitively (Unicode simple folding), and mcp-go decodes with it.
// A member the proxy does not read under its exact name ("RequestState",
// "Method", "requeſtState" with U+017F) is read by such an upstream as
// the protocol member, so it would receive a state, answers, a method or
// a target the guard never checked. Such bodies are refused.
func TestCaseFoldedNames(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	st := upStateJSON()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	// In params, the answer names the request; in the envelope, the id is
	// not trusted (it may be the folded member that was meant), so null.
	for _, c := range []struct{ body, id string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask",` + meta + `,"RequestState":` + st + `}}`, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask",` + meta + `,"requeſtState":` + st + `}}`, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask",` + meta + `,"\u0052equestState":` + st + `}}`, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask",` + meta + `,"InputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}}}`, "1"},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"plain",` + meta + `,"NAME":"ask"}}`, `"a"`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{"name":"ask","requestState":` + st + `}}`, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plain",` + meta + `},"PARAMS":{"name":"ask","requestState":` + st + `}}`, "null"},
		{`{"jsonrpc":"2.0","id":1,"ID":2,"method":"tools/call","params":{"name":"plain",` + meta + `}}`, "null"},
	} {
		resp, err := http.Post(px.URL, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		r.raw = readAll(resp)
		decode(t, r.raw, &r)
		if resp.StatusCode != http.StatusBadRequest || r.err == nil || r.err.Code != -32600 || string(r.id) != c.id {
			t.Errorf("%.90s: %d %s, want 400 -32600 with id %s", c.body, resp.StatusCode, r.raw, c.id)
		}
	}
	for _, s := range up.all() {
		b, _ := json.Marshal(s.params)
		t.Errorf("a case-folded body reached the upstream: %s %s", s.method, b)
	}
}
