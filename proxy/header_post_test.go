package proxy_test

import (
	"net/http"
	"testing"
)

// TestHeaderMismatchEveryPost: the MCP request headers are checked against
// the body on every POST, not only on a pausable call: a tools/list body
// whose headers say tools/call of deploy (a header-routing upstream would
// run deploy with the forged state inside) is refused with -32020, HTTP
// 400 and the request's id, before anything reaches the upstream.
func TestHeaderMismatchEveryPost(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	forged := `"name":"deploy","requestState":"forged","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`
	for _, tc := range []struct {
		what string
		body string
		hd   http.Header
		id   string
	}{
		{"tools/list as tools/call of deploy", rpcBody(7, "tools/list", forged),
			http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"deploy"}, "Mcp-Protocol-Version": {"2026-07-28"}}, "7"},
		{"tools/list with an Mcp-Name", rpcBody(8, "tools/list", ""),
			http.Header{"Mcp-Method": {"tools/list"}, "Mcp-Name": {"other"}}, "8"},
		{"tools/list under another version", rpcBody(9, "tools/list", ""),
			http.Header{"Mcp-Method": {"tools/list"}, "Mcp-Protocol-Version": {"2025-11-25"}}, "9"},
		{"tools/list with Mcp-Method twice", rpcBody(10, "tools/list", ""),
			http.Header{"Mcp-Method": {"tools/list", "tools/call"}}, "10"},
		{"resources/subscribe of another uri", rpcBody(14, "resources/subscribe", `"uri":"file:///a"`),
			http.Header{"Mcp-Name": {"file:///b"}}, "14"},
		{"resources/read naming its name, not its uri", rpcBody(15, "resources/read", `"uri":"file:///a","name":"a"`),
			http.Header{"Mcp-Name": {"a"}}, "15"},
		{"tasks/get of another task", rpcBody(11, "tasks/get", `"taskId":"t1"`),
			http.Header{"Mcp-Method": {"tasks/get"}, "Mcp-Name": {"t2"}}, "11"},
		{"a notification as another method", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
			http.Header{"Mcp-Method": {"notifications/progress"}}, "null"},
		{"a first tools/call naming another tool", rpcBody(12, "tools/call", `"name":"ask"`),
			http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"other"}}, "12"},
		{"a first tools/call without a name", rpcBody(13, "tools/call", ""),
			http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"ask"}}, "13"},
	} {
		wantError(t, tc.what, send(t, px.URL, tc.body, tc.hd), http.StatusBadRequest, -32020, tc.id)
	}
	if n := len(up.all()); n != 0 {
		t.Fatalf("%d requests with mismatched headers reached the upstream", n)
	}
	// Matching headers, or none, pass.
	for _, tc := range []struct {
		body string
		hd   http.Header
	}{
		{rpcBody(20, "tools/list", ""), http.Header{"Mcp-Method": {"tools/list"}, "Mcp-Protocol-Version": {"2026-07-28"}}},
		{rpcBody(21, "prompts/list", ""), http.Header{"Mcp-Method": {"prompts/list"}}},
		// A client mirroring a name or uri on another method.
		{rpcBody(24, "resources/subscribe", `"uri":"file:///a"`), http.Header{"Mcp-Method": {"resources/subscribe"}, "Mcp-Name": {"file:///a"}}},
		{`{"jsonrpc":"2.0","id":22,"method":"tools/list","params":{}}`, http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}},
		{rpcBody(23, "tools/list", ""), nil},
	} {
		if r := send(t, px.URL, tc.body, tc.hd); r.status != http.StatusOK || r.err != nil {
			t.Errorf("%s with %v: %d %s", tc.body, tc.hd, r.status, r.raw)
		}
	}
	// (A tasks/get whose Mcp-Name matches passes the header check, but
	// reaches the upstream only naming a task the proxy sealed to the
	// caller: tasks_test.go.)
	if n := len(up.all()); n != 5 {
		t.Fatalf("%d matching requests reached the upstream, want 5", n)
	}
}
