package proxy_test

import (
	"net/http"
	"testing"
)

// A request whose MCP headers name another tool, method or protocol
// version than its body is refused with -32020 before anything reaches the
// upstream: the token is bound to the body, and an upstream routing on the
// header would run what the guard never checked.
func TestHeaderMismatch(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	tok := pause(t, px.URL, "ask", nil)
	before := len(up.all())
	for _, h := range []http.Header{
		{"Mcp-Name": {"other"}},
		{"Mcp-Method": {"prompts/get"}},
		{"Mcp-Protocol-Version": {"2025-11-25"}},
		{"Mcp-Name": {"ask", "other"}},
		{"Mcp-Name": {"=?base64?b3RoZXI=?="}}, // "other", in the spec's sentinel form
		{"Mcp-Name": {"=?base64?!!?="}},       // a sentinel that does not decode
	} {
		r := post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed(), header: h})
		if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != -32020 {
			t.Errorf("headers %v: status %d, error %+v; want 400 and -32020", h, r.status, r.err)
		}
	}
	if n := len(up.all()) - before; n != 0 {
		t.Fatalf("%d requests with mismatched headers reached the upstream", n)
	}
	// The token was never reserved by a refused request: it still resumes,
	// here with its name in the sentinel form, which decodes to the body's.
	if r := post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed(),
		header: http.Header{"Mcp-Name": {"=?base64?YXNr?="}}}); r.err != nil {
		t.Fatalf("the resume after refused mismatches: %+v", r.err)
	}
}
