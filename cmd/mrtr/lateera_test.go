package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// postStatus posts a 2026-07-28 tools/call of delete to url and returns
// the HTTP status and the JSON-RPC error, if any.
func postStatus(t *testing.T, url string) (int, map[string]json.RawMessage) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete","arguments":{"item":"a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "delete")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m struct {
		ID    json.RawMessage            `json:"id"`
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &m) != nil || !bytes.Equal(m.ID, []byte("7")) {
		t.Fatalf("HTTP %d, not a JSON-RPC answer with id 7: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, m.Error
}

// closeUpstream closes the upstream srv after the proxy in front of it
// stopped: within upstreamCloseWait, as the proxy's stop ends the
// bridge's sessions (and their GET streams) with the upstream; a failure
// then, never a hang, when it did not.
func closeUpstream(t *testing.T, srv *httptest.Server) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
		return
	case <-time.After(upstreamCloseWait):
	}
	t.Errorf("the upstream still has requests open %v after the proxy in front of it stopped: the proxy did not close its bridge's sessions (their GET streams)", upstreamCloseWait)
	srv.CloseClientConnections()
	<-closed
}

// upstreamCloseWait is how long closeUpstream waits for the upstream's
// requests to end.
const upstreamCloseWait = 10 * time.Second

// TestProxyHTTPUpstreamLate: `mrtr proxy --upstream URL` started before
// its upstream (the start race of compose or Kubernetes): /readyz is 503
// and a call is refused (503, -32603, "not reachable yet") rather than
// passed on as if the upstream were modern; a 2025-11-25 server that
// comes up a second later is then judged as such and bridged: a call
// waiting meanwhile, and the next, pause with a sealed token, the resume
// completes, /readyz turns 200 and the log says the era.
func TestProxyHTTPUpstreamLate(t *testing.T) {
	addr := testcmd.FreeAddr(t) // nothing listens there until the upstream starts
	p := startDrainedProxy(t, "--upstream", "http://"+addr+"/mcp")

	if code, checks := readyz(t, p.url); code != http.StatusServiceUnavailable || checks["upstream"] != "unreachable" {
		t.Fatalf("/readyz before the upstream: %d %v, want 503 with upstream: unreachable", code, checks)
	}
	if code, e := postStatus(t, p.url); code != http.StatusServiceUnavailable || !strings.Contains(string(e["message"]), "not reachable yet") || string(e["code"]) != "-32603" {
		t.Fatalf("a call before the upstream: HTTP %d %v, want 503 -32603 not reachable yet", code, e)
	}

	// The upstream comes up a second after this call arrives; the call
	// waits for it.
	go func() {
		time.Sleep(time.Second)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen on the upstream's address again: %v", err)
			return
		}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: legacyHTTPHandler()}}
		srv.Start()
		t.Cleanup(func() { closeUpstream(t, srv) })
	}()
	tok, key := pauseDelete(t, p.url, "a")
	if got := resumeDelete(t, p.url, "a", tok, key); !strings.Contains(got, "deleted a") {
		t.Fatalf("resume: %s", got)
	}
	tok, key = pauseDelete(t, p.url, "b")
	if got := resumeDelete(t, p.url, "b", tok, key); !strings.Contains(got, "deleted b") {
		t.Fatalf("second resume: %s", got)
	}
	if code, checks := readyz(t, p.url); code != http.StatusOK {
		t.Fatalf("/readyz once the upstream answers: %d %v, want 200", code, checks)
	}
	logs := p.logs.String()
	for _, want := range []string{"the upstream does not answer yet", "the upstream speaks 2025-11-25", `"msg":"mrtr proxy: the upstream answers: its era is known, calls go through","upstream":"http://` + addr + `/mcp","era":"legacy"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "taking it as 2026-07-28") {
		t.Errorf("the upstream was taken as modern:\n%s", logs)
	}
	p.drain()
	if code := p.exit(10 * time.Second); code != 0 {
		t.Fatalf("exit %d after the drain signal", code)
	}
}

// TestProxyHTTPUpstreamLateModern: a 2026-07-28 upstream that comes up
// after the proxy is judged modern and its calls pass through.
func TestProxyHTTPUpstreamLateModern(t *testing.T) {
	addr := testcmd.FreeAddr(t)
	// With replicas on (a Redis store), --advertise waits for the era: a
	// modern upstream makes it useless, and the log says so then.
	p := startDrainedProxy(t, "--upstream", "http://"+addr+"/mcp", "--replay", testredis.Start(t), "--advertise", "http://127.0.0.1:1/mcp")
	if logs := p.logs.String(); strings.Contains(logs, "--advertise is ignored") {
		t.Fatalf("--advertise called ignored before the era is known:\n%s", logs)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		if req.Method == "server/discover" {
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}`))
			return
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"resultType":"complete","content":[{"type":"text","text":"modern answer"}]}}`))
	})}}
	srv.Start()
	defer closeUpstream(t, srv)
	res, e := testcmd.RPCPost(t, p.url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}})
	if e != nil || !strings.Contains(string(res["content"]), "modern answer") {
		t.Fatalf("call: %v %v", res, e)
	}
	if logs := p.logs.String(); !strings.Contains(logs, `"era":"modern"`) || !strings.Contains(logs, "the upstream speaks 2026-07-28") {
		t.Fatalf("no line naming the modern era:\n%s", logs)
	}
	if logs := p.logs.String(); !strings.Contains(logs, "--advertise is ignored") {
		t.Fatalf("a modern upstream, known late, and no word that --advertise does nothing:\n%s", logs)
	}
}

// TestProxyHTTPUpstreamLateReplicas: two replicas on one Redis, both
// started before their 2025-11-25 HTTP upstream: once it answers, each
// bridges it and advertises itself then, so a call paused on A is resumed
// through B (forwarded to A) and completes.
func TestProxyHTTPUpstreamLateReplicas(t *testing.T) {
	rurl := testredis.Start(t)
	ring := filepath.Join(t.TempDir(), "keys.json")
	testcmd.WriteRing(t, ring, testcmd.GenKey(t, "k1"))
	addr := testcmd.FreeAddr(t)
	args := []string{"--upstream", "http://" + addr + "/mcp", "--keys", ring, "--replay", rurl}
	var srv *httptest.Server
	t.Cleanup(func() { // after the proxies' (their sessions' GET streams end then)
		if srv != nil {
			closeUpstream(t, srv)
		}
	})
	a := startDrainedProxy(t, args...)
	b := startDrainedProxy(t, args...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: legacyHTTPHandler()}}
	srv.Start()
	tok, key := pauseDelete(t, a.url, "a") // waits for A to know the era
	// B judges the era on its own backoff (a readiness check asks for a
	// probe at once).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(b.logs.String(), "mrtr proxy: replicas on"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B did not turn replicas on:\n%s", b.logs.String())
		}
		readyz(t, b.url)
	}
	if got := resumeDelete(t, b.url, "a", tok, key); !strings.Contains(got, "deleted a") {
		t.Fatalf("resume through B of a call held by A: %s", got)
	}
	if !strings.Contains(a.logs.String(), "mrtr proxy: replicas on") {
		t.Fatalf("A did not turn replicas on:\n%s", a.logs.String())
	}
}
