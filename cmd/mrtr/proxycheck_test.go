package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// postList sends a non-pausable tools/list through the proxy.
func postList(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestProxyUpstreamNotFound pins issue 21 item 11: an upstream that
// answers 404 (a forgotten /mcp) is reported at startup (a warning: the
// proxy starts), each failed call is logged at debug and a run of them at
// warn, /readyz says not_found, and once the upstream answers the proxy
// says so and is ready. (This upstream tells its era, 2026-07-28; one
// that answers 404 even to that is TestProxyUpstreamUnreachable's.)
func TestProxyUpstreamNotFound(t *testing.T) {
	var ok atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "server/discover" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}`))
			return
		}
		if !ok.Load() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`))
	}))
	defer up.Close()
	url, logs := startProxyCmd(t, "--upstream", up.URL, "--log-level", "debug")
	start := testcmd.LogLines(logs, "mrtr proxy: the upstream does not serve MCP yet; calls fail until it does")
	if len(start) != 1 || !strings.Contains(start[0]["error"].(string), "HTTP 404") || !strings.Contains(start[0]["error"].(string), "/mcp") || start[0]["level"] != "WARN" {
		t.Fatalf("startup warning: %v\n%s", start, logs)
	}
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","upstream":"not_found"}}` {
		t.Errorf("/readyz with a 404 upstream: %d %s", code, body)
	}
	before := len(testcmd.LogLines(logs, "proxy: upstream answered an HTTP error"))
	for range 3 {
		if code := postList(t, url); code != http.StatusNotFound {
			t.Fatalf("tools/list: HTTP %d", code)
		}
	}
	if n := len(testcmd.LogLines(logs, "proxy: upstream answered an HTTP error")) - before; n != 3 {
		t.Errorf("%d debug lines for 3 failed calls:\n%s", n, logs)
	}
	warns := testcmd.LogLines(logs, "proxy: the upstream failed several requests in a row; check --upstream and that it runs")
	if len(warns) != 1 || warns[0]["level"] != "WARN" {
		t.Errorf("warnings for a run of failures: %v", warns)
	}
	ok.Store(true)
	if code := postList(t, url); code != http.StatusOK {
		t.Fatalf("tools/list once the upstream answers: HTTP %d", code)
	}
	if len(testcmd.LogLines(logs, "proxy: the upstream answers again")) != 1 {
		t.Errorf("no line saying the upstream answers again:\n%s", logs)
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok","upstream":"ok"}}` {
		t.Errorf("/readyz once the upstream answers: %d %s", code, body)
	}
}

// TestProxyUpstreamUnreachable pins issue 21 item 11 and issue 28 item 2:
// an upstream that is not there yet, or that answers 404 to everything, is
// a warning at startup naming the cause, not a refusal, and /readyz says
// unreachable or not_found (its era is told once it answers:
// TestProxyHTTPUpstreamLate).
func TestProxyUpstreamUnreachable(t *testing.T) {
	const warning = "mrtr proxy: the upstream does not answer yet: /readyz answers 503 and calls wait for it (then get an error) until it does; its era is judged as soon as it answers"
	addr := testcmd.FreeAddr(t) // nothing listens there now
	url, logs := startProxyCmd(t, "--upstream", "http://"+addr+"/mcp")
	if w := testcmd.LogLines(logs, warning); len(w) != 1 || !strings.Contains(w[0]["error"].(string), "connection refused") {
		t.Fatalf("no startup warning:\n%s", logs)
	}
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","upstream":"unreachable"}}` {
		t.Errorf("/readyz with no upstream: %d %s", code, body)
	}

	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	url, logs = startProxyCmd(t, "--upstream", up.URL)
	if w := testcmd.LogLines(logs, warning); len(w) != 1 || !strings.Contains(w[0]["error"].(string), "HTTP 404") || !strings.Contains(w[0]["error"].(string), "/mcp") {
		t.Fatalf("no startup warning naming HTTP 404 and /mcp:\n%s", logs)
	}
	if code, body := testcmd.GetHealth(t, strings.TrimSuffix(url, "/mcp")+"/readyz"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","upstream":"not_found"}}` {
		t.Errorf("/readyz with a 404 upstream: %d %s", code, body)
	}
}
