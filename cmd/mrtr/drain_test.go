package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// drainedProxy is `mrtr proxy` run in process, stoppable the way signals
// stop the binary: signal (the first SIGTERM, a drain) and force (the
// second).
type drainedProxy struct {
	url   string
	logs  *testcmd.Buffer
	done  chan int // the exit code, once run returns
	drain func()
	force context.CancelFunc
}

// startDrainedProxy starts `mrtr proxy` with args and waits for it to
// serve; at cleanup it is forced to stop if it still runs.
func startDrainedProxy(t *testing.T, args ...string) *drainedProxy {
	t.Helper()
	sig := make(chan struct{})
	p := &drainedProxy{logs: new(testcmd.Buffer), done: make(chan int, 1), drain: sync.OnceFunc(func() { close(sig) })}
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: p.logs, Getenv: func(string) string { return "" }, Drain: sig}
	ctx, cancel := context.WithCancel(context.Background())
	p.force = cancel
	exited := make(chan struct{})
	go func() {
		p.done <- run(ctx, a, append([]string{"proxy", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...))
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if u := testcmd.ServingURL(p.logs.String()); u != "" {
			p.url = u
			return p
		}
	}
	t.Fatalf("proxy did not start: %s", p.logs.String())
	return nil
}

// exit waits up to d for the proxy to return and reports its code, or
// -1 if it still runs.
func (p *drainedProxy) exit(d time.Duration) int {
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(d):
		return -1
	}
}

// readyz returns the status of /readyz and its checks.
func readyz(t *testing.T, mcpURL string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(mcpURL, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]string }
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks
}

// pauseDelete makes legacyHTTPServer's delete tool pause through the
// proxy at url and returns its sealed state and the one input key.
func pauseDelete(t *testing.T, url, item string) (string, string) {
	t.Helper()
	res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": item}})
	var tok string
	json.Unmarshal(res["requestState"], &tok)
	var irs map[string]json.RawMessage
	json.Unmarshal(res["inputRequests"], &irs)
	if e != nil || string(res["resultType"]) != `"input_required"` || !strings.HasPrefix(tok, "v1.") || len(irs) != 1 {
		t.Fatalf("want a sealed pause, got %v %v", res, e)
	}
	for k := range irs {
		return tok, k
	}
	return "", ""
}

// resumeDelete answers a pause of pauseDelete and returns the result's
// content.
func resumeDelete(t *testing.T, url, item, tok, key string) string {
	t.Helper()
	answers := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": item}, "requestState": tok, "inputResponses": answers})
	if e != nil {
		t.Fatalf("resume: %v", e)
	}
	return string(res["content"])
}

// TestProxyDrain: the first signal turns /readyz 503 ("draining") at once;
// the proxy goes on serving, a new call included, and stops on its own,
// with status 0, once no call is held any more.
func TestProxyDrain(t *testing.T) {
	up := legacyHTTPServer(t)
	p := startDrainedProxy(t, "--upstream", up)
	tok, key := pauseDelete(t, p.url, "a")
	p.drain()
	if code, checks := readyz(t, p.url); code != http.StatusServiceUnavailable || checks["drain"] != "draining" {
		t.Fatalf("/readyz while draining: %d %v, want 503 with drain: draining", code, checks)
	}
	if code := p.exit(300 * time.Millisecond); code != -1 {
		t.Fatalf("the proxy exited (%d) while a call is held:\n%s", code, p.logs.String())
	}
	tok2, key2 := pauseDelete(t, p.url, "b") // a new call is served, and held too
	if got := resumeDelete(t, p.url, "a", tok, key); !strings.Contains(got, "deleted a") {
		t.Fatalf("resume during the drain: %s", got)
	}
	if code := p.exit(300 * time.Millisecond); code != -1 {
		t.Fatalf("the proxy exited (%d) while a call is still held:\n%s", code, p.logs.String())
	}
	if got := resumeDelete(t, p.url, "b", tok2, key2); !strings.Contains(got, "deleted b") {
		t.Fatalf("second resume during the drain: %s", got)
	}
	if code := p.exit(10 * time.Second); code != 0 {
		t.Fatalf("after the last held call: exit %d, want 0 on its own:\n%s", code, p.logs.String())
	}
	logs := p.logs.String()
	for _, want := range []string{`"msg":"mrtr draining: /readyz answers 503`, `"held":1`, `"msg":"mrtr drained: no call held or in flight"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
	}
}

// TestProxyDrainCutShort: a second signal during a drain stops the proxy
// at once; so does the end of --drain-timeout; with --drain-timeout 0 it
// does not wait at all. Each exits 0, saying what was lost.
func TestProxyDrainCutShort(t *testing.T) {
	for _, tc := range []struct {
		name, timeout, want string
		force               bool
	}{
		{"second signal", "1h", "mrtr stopping at once (second signal)", true},
		{"timeout", "1s", "mrtr drain timed out (--drain-timeout)", false},
		{"zero", "0", "mrtr drain timed out (--drain-timeout)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := legacyHTTPServer(t)
			p := startDrainedProxy(t, "--upstream", up, "--drain-timeout", tc.timeout)
			pauseDelete(t, p.url, "a")
			p.drain()
			if tc.force {
				if code := p.exit(500 * time.Millisecond); code != -1 {
					t.Fatalf("exited (%d) before the second signal", code)
				}
				p.force()
			}
			if code := p.exit(10 * time.Second); code != 0 {
				t.Fatalf("exit %d, want 0 within 10 s:\n%s", code, p.logs.String())
			}
			if logs := p.logs.String(); !strings.Contains(logs, tc.want) || !strings.Contains(logs, `"held":1`) {
				t.Fatalf("no %q naming the held call in the log:\n%s", tc.want, logs)
			}
		})
	}
}

// TestServeDrainIdle: `mrtr serve` with nothing in flight stops at once
// on the first signal.
func TestServeDrainIdle(t *testing.T) {
	sig := make(chan struct{})
	logs := new(testcmd.Buffer)
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }, Drain: sig}
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), a, []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"})
	}()
	for deadline := time.Now().Add(10 * time.Second); testcmd.ServingURL(logs.String()) == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
	}
	close(sig)
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(logs.String(), "mrtr drained") {
			t.Fatalf("exit %d:\n%s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve still runs 10 s after the drain signal:\n%s", logs.String())
	}
}

// TestProxyDrainCutsStreams: a 2025-11-25 client's GET stream, passed
// through to the upstream, is not waited for: once nothing is held or in
// flight, the proxy cuts it and exits 0.
func TestProxyDrainCutsStreams(t *testing.T) {
	p := startDrainedProxy(t, "--upstream", legacyHTTPServer(t))
	sid := initLegacy(t, p.url)
	req, _ := http.NewRequest(http.MethodGet, p.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", stream.StatusCode)
	}
	p.drain()
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d with a GET stream open, want 0:\n%s", code, p.logs.String())
	}
	if !strings.Contains(p.logs.String(), "mrtr shutting down: the streams still open are cut") {
		t.Fatalf("no line saying the stream was cut:\n%s", p.logs.String())
	}
}

// initLegacy opens a 2025-11-25 client session at url and returns its
// Mcp-Session-Id.
func initLegacy(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	return id
}

// TestProxyDrainNamesFlows (issue 39, item 6): a drain that waits for an
// abandoned held call says which: its records name the flow (the id the
// audit trail gives it), its method and target, and that it is held.
func TestProxyDrainNamesFlows(t *testing.T) {
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startDrainedProxy(t, "--upstream", legacyHTTPServer(t), "--drain-timeout", "1s", "--audit", trail)
	pauseDelete(t, p.url, "a") // and never resumed
	p.drain()
	if code := p.exit(10 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0 within 10 s:\n%s", code, p.logs.String())
	}
	raw, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	var paused struct{ Event, Flow string }
	for line := range strings.Lines(string(raw)) {
		if json.Unmarshal([]byte(line), &paused) == nil && paused.Event == "paused" {
			break
		}
	}
	if paused.Flow == "" {
		t.Fatalf("no paused line with a flow in the trail:\n%s", raw)
	}
	// A flow as the log names it.
	type flowRef struct {
		Flow   string `json:"flow,omitempty"`
		Method string `json:"method"`
		Target string `json:"target,omitempty"`
		State  string `json:"state"`
		Round  int    `json:"round,omitempty"`
	}
	want := flowRef{Flow: paused.Flow, Method: "tools/call", Target: "delete", State: "held", Round: 1}
	logs := p.logs.String()
	for _, msg := range []string{"mrtr draining: /readyz answers 503", "mrtr drain timed out"} {
		recs := testcmd.Records(logs, msg)
		if len(recs) != 1 {
			t.Fatalf("%d records %q, want 1:\n%s", len(recs), msg, logs)
		}
		var got []flowRef
		if err := json.Unmarshal(recs[0]["waiting_for"], &got); err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("record %q waits for %s, want [%+v]", msg, recs[0]["waiting_for"], want)
		}
	}
}
