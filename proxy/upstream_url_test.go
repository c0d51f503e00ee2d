package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPausableUpstreamURL: a pausable call goes to exactly the upstream
// URL, with the client's query string when the upstream's has none.
func TestPausableUpstreamURL(t *testing.T) {
	for _, tc := range []struct{ upQuery, clientQuery, want string }{
		{"", "?tenant=a", "/mcp?tenant=a"},
		{"?k=1", "?tenant=a", "/mcp?k=1"},
	} {
		var got, host string
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, host = r.URL.RequestURI(), r.Host
			var m struct{ ID json.RawMessage }
			json.NewDecoder(r.Body).Decode(&m)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","content":[]}}`))
		}))
		px := startProxy(t, up.URL+"/mcp"+tc.upQuery, nil, nil, nil)
		if r := send(t, px.URL+"/other"+tc.clientQuery, rpcBody(1, "tools/call", `"name":"ask"`), nil); r.err != nil {
			t.Fatalf("call: %s", r.raw)
		}
		if got != tc.want || "http://"+host != up.URL {
			t.Errorf("upstream %q got %s on host %s; want %s on %s", tc.upQuery, got, host, tc.want, up.URL)
		}
		up.Close()
	}
}
