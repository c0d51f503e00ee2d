package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// TestProxyCommandUpstream: `mrtr proxy -- COMMAND` runs the upstream as a
// child over stdio, finds its era, and seals its pauses either way: a
// modern child's own input_required, or a legacy child's mid-call
// elicitation through the bridge. The child never sees MRTR_* variables
// but gets --upstream-env.
func TestProxyCommandUpstream(t *testing.T) {
	t.Setenv("MRTR_KEYS", "must-not-reach-the-child")
	for _, kind := range []string{"modern", "legacy"} {
		t.Run(kind, func(t *testing.T) {
			url, logs := startProxyCmd(t, "--upstream-env", testcmd.StdioServerEnv+"="+kind, "--upstream-env", "EXTRA=1", "--", os.Args[0])
			want := map[string]string{"modern": "the upstream speaks 2026-07-28", "legacy": "the upstream speaks 2025-11-25"}[kind]
			if !strings.Contains(logs.String(), want) {
				t.Fatalf("no startup line %q:\n%s", want, logs.String())
			}
			args := map[string]any{"item": "a"}
			res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args})
			var tok string
			json.Unmarshal(res["requestState"], &tok)
			if e != nil || string(res["resultType"]) != `"input_required"` || !strings.HasPrefix(tok, "v1.") {
				t.Fatalf("first call: %v %v", res, e)
			}
			var irs map[string]json.RawMessage
			json.Unmarshal(res["inputRequests"], &irs)
			if len(irs) != 1 {
				t.Fatalf("inputRequests %s", res["inputRequests"])
			}
			var key string
			for key = range irs {
			}
			answers := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
			res, e = testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok, "inputResponses": answers})
			if e != nil || !strings.Contains(string(res["content"]), "deleted a") {
				t.Fatalf("resume: %v %v", res, e)
			}
			_, e = testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": args, "requestState": tok, "inputResponses": answers})
			if e == nil || !strings.Contains(string(e["data"]), "replayed") {
				t.Fatalf("replay: %v", e)
			}
			res, e = testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "env", "arguments": map[string]any{}})
			if e != nil || !strings.Contains(string(res["content"]), "EXTRA=1") || strings.Contains(string(res["content"]), "MRTR_") {
				t.Fatalf("the child's environment: %v %v", res, e)
			}
		})
	}
}

// TestProxyCommandUpstreamObserved: /metrics counts a command upstream's
// processes and held calls, and /readyz turns unready while the upstream
// cannot be started.
func TestProxyCommandUpstreamObserved(t *testing.T) {
	url, logs := startProxyCmd(t, "--metrics-addr", "127.0.0.1:0", "--upstream-env", testcmd.StdioServerEnv+"=legacy", "--", os.Args[0])
	metrics := testcmd.LogURL(t, logs, "mrtr metrics serving")
	base := strings.TrimSuffix(url, "/mcp")
	res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}})
	if e != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("pause: %v %v", res, e)
	}
	_, body := testcmd.GetHealth(t, metrics)
	for _, want := range []string{"mrtr_bridge_held_calls 1", "mrtr_upstream_processes 1", "mrtr_upstream_processes_idle 0", "mrtr_upstream_notifications_dropped_total 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"upstream":"ok"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}

	// An upstream that exits at once: the proxy serves, but is not ready.
	url, _ = startProxyCmd(t, "--upstream-era", "legacy", "--", "/bin/false")
	base = strings.TrimSuffix(url, "/mcp")
	if _, e := testcmd.RPCPost(t, url, "tools/list", map[string]any{}); e == nil || !strings.Contains(string(e["message"]), "could not be") {
		t.Fatalf("a call to an upstream that cannot start: %v", e)
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || !strings.Contains(body, `"upstream"`) {
		t.Fatalf("/readyz with an upstream that cannot start: %d %s", code, body)
	}
}
