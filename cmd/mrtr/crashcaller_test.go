package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// TestProxyCallerCrashNoCrashLoop (issue 35, item 3): four calls of a
// tool that makes the command exit, through `mrtr proxy -- COMMAND`,
// each fail alone (a JSON-RPC error), for a 2026-07-28 command (the
// shared child) and a 2025-11-25 one (bridged); /readyz stays 200 and
// the next call is served. Before, the shared child's four ends before
// answering anything were a crash loop: /readyz said crash_loop and every
// caller got "keeps failing to start".
func TestProxyCallerCrashNoCrashLoop(t *testing.T) {
	for _, kind := range []string{"modern", "legacy"} {
		t.Run(kind, func(t *testing.T) {
			url, logs := startProxyCmd(t, "--upstream-env", testcmd.StdioServerEnv+"="+kind+"+exit", "--", os.Args[0])
			base := strings.TrimSuffix(url, "/mcp")
			for i := range 4 {
				if res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "exit", "arguments": map[string]any{}}); e == nil {
					t.Fatalf("exit %d: %s, want the call's error", i, res)
				}
				if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 {
					t.Fatalf("/readyz after exit %d: %d %s\n%s", i, code, body, logs.String())
				}
			}
			res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}})
			if e != nil || string(res["resultType"]) != `"input_required"` {
				t.Fatalf("a call after the exits: %v %v\n%s", res, e, logs.String())
			}
		})
	}
}
