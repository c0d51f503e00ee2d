package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/probe"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// startTSUpstream runs conformance/ts-upstream.mjs (a server on
// @modelcontextprotocol/server 2.4.0 whose state is plain JSON; with the
// argument "codec", sealed by the SDK's createRequestStateCodec) with the
// pinned Node 22 and returns its URL. It is killed by its pid at cleanup.
func startTSUpstream(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "conformance")
	cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "node"), append([]string{"ts-upstream.mjs", "0"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				url <- u
			}
		}
		close(url)
	}()
	select {
	case u, ok := <-url:
		if !ok {
			t.Fatalf("ts-upstream.mjs exited: %s", stderr.String())
		}
		return u
	case <-time.After(60 * time.Second):
		t.Fatalf("ts-upstream.mjs not listening after 60 s: %s", stderr.String())
	}
	return ""
}

// tsCall is one 2026-07-28 tools/call as user (X-User header; the
// TypeScript server ignores it, the proxy binds tokens to it).
func tsCall(t *testing.T, url, user, tool string, args map[string]any, state string) map[string]any {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("reply is not JSON (%v): %s", err, b)
	}
	return out
}

// outcome is "complete: <text>", "input_required" or "error: <reason>".
func outcome(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		d, _ := e["data"].(map[string]any)
		r, _ := d["reason"].(string)
		return "error: " + r
	}
	r, _ := m["result"].(map[string]any)
	if r["resultType"] == "input_required" {
		return "input_required"
	}
	c, _ := r["content"].([]any)
	if len(c) > 0 {
		txt, _ := c[0].(map[string]any)["text"].(string)
		return "complete: " + txt
	}
	return "complete"
}

func stateOf(t *testing.T, m map[string]any) string {
	t.Helper()
	r, _ := m["result"].(map[string]any)
	s, _ := r["requestState"].(string)
	if s == "" {
		t.Fatalf("no requestState in %v", m)
	}
	return s
}

// TestProxyTypeScriptPlainState: a TypeScript server that keeps its state
// in plain JSON accepts tampering, a token moved to another tool, changed
// arguments, replay, a stale state and another caller when called
// directly; behind the proxy every one of them is refused, and the honest
// flow still works.
func TestProxyTypeScriptPlainState(t *testing.T) {
	needHarness(t) // the same npm install brings @modelcontextprotocol/server
	t.Parallel()
	up := startTSUpstream(t)

	ring, err := reqstate.GenerateKeyRing("e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now())
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "ts-proxy", Store: replay.NewMemory(nil), Now: clock.Now, TTL: time.Minute})
	h, err := proxy.New(proxy.Options{Upstream: up, Guard: guard, Principal: func(r *http.Request) (reqstate.Principal, error) {
		return reqstate.Principal{Issuer: "e2e", Subject: r.Header.Get("X-User")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	px := srv.URL + "/mcp"

	args := map[string]any{"to": "bob", "amount": 5}
	forged := `{"to":"mallory","amount":1000000}`
	for _, tc := range []struct {
		name   string
		direct func(state string) string // what the attack gets straight from the upstream
		proxy  func(token string) string // ... and through the proxy
		want   string                    // the proxy's answer
	}{
		{"tampered state",
			func(string) string { return outcome(tsCall(t, up, "alice", "transfer", args, forged)) },
			func(tok string) string {
				return outcome(tsCall(t, px, "alice", "transfer", args, probe.FlipMiddle(tok)))
			},
			"error: invalid"},
		{"forged plain state",
			func(string) string { return outcome(tsCall(t, up, "alice", "transfer", args, forged)) },
			func(string) string { return outcome(tsCall(t, px, "alice", "transfer", args, forged)) },
			"error: invalid"},
		{"moved to another tool",
			func(st string) string { return outcome(tsCall(t, up, "alice", "audit", map[string]any{}, st)) },
			func(tok string) string { return outcome(tsCall(t, px, "alice", "audit", map[string]any{}, tok)) },
			"error: invalid"},
		{"changed arguments",
			func(st string) string {
				return outcome(tsCall(t, up, "alice", "transfer", map[string]any{"to": "bob", "amount": 7}, st))
			},
			func(tok string) string {
				return outcome(tsCall(t, px, "alice", "transfer", map[string]any{"to": "bob", "amount": 7}, tok))
			},
			"error: arguments_changed"},
		{"another caller",
			func(st string) string { return outcome(tsCall(t, up, "mallory", "transfer", args, st)) },
			func(tok string) string { return outcome(tsCall(t, px, "mallory", "transfer", args, tok)) },
			"error: invalid"},
		{"replay",
			func(st string) string {
				tsCall(t, up, "alice", "transfer", args, st)
				return outcome(tsCall(t, up, "alice", "transfer", args, st))
			},
			func(tok string) string {
				if got := outcome(tsCall(t, px, "alice", "transfer", args, tok)); got != "complete: transferred 5 to bob" {
					t.Fatalf("the honest resume through the proxy: %s", got)
				}
				return outcome(tsCall(t, px, "alice", "transfer", args, tok))
			},
			"error: replayed"},
		{"expired",
			func(st string) string { return outcome(tsCall(t, up, "alice", "transfer", args, st)) },
			func(tok string) string {
				clock.Advance(2 * time.Minute)
				return outcome(tsCall(t, px, "alice", "transfer", args, tok))
			},
			"error: expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := stateOf(t, tsCall(t, up, "alice", "transfer", args, ""))
			if got := tc.direct(st); !strings.HasPrefix(got, "complete") {
				t.Errorf("direct: the TypeScript server refused (%s); the test premise is gone", got)
			} else {
				t.Logf("direct: %s", got)
			}
			tok := stateOf(t, tsCall(t, px, "alice", "transfer", args, ""))
			if strings.Contains(tok, "bob") {
				t.Fatalf("the upstream's plain state leaked through the proxy: %s", tok)
			}
			if got := tc.proxy(tok); got != tc.want {
				t.Errorf("through the proxy: %s, want %s", got, tc.want)
			}
		})
	}
}
