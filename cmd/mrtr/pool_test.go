//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// eventually fails t unless cond holds within testcmd.Patience, polling.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testcmd.Patience); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, testcmd.Patience)
		}
	}
}

// TestProxyProbeChildServesFirstCall (issue 28, item 1): the process the
// proxy started to learn the era serves the first call, for a 2025-11-25
// command (bridged) and a 2026-07-28 one (shared) alike: one process
// start in all. It used to be stopped, and the first call started a
// second.
func TestProxyProbeChildServesFirstCall(t *testing.T) {
	for _, kind := range []string{"legacy", "modern"} {
		t.Run(kind, func(t *testing.T) {
			url, logs := startProxyCmd(t, "--log-level", "debug", "--upstream-env", testcmd.StdioServerEnv+"="+kind, "--", os.Args[0])
			res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}})
			if e != nil || string(res["resultType"]) != `"input_required"` {
				t.Fatalf("pause: %v %v", res, e)
			}
			if n := strings.Count(logs.String(), `"msg":"bridge: upstream process started"`); n != 1 {
				t.Fatalf("%d processes started for the probe and the first call, want 1:\n%s", n, logs.String())
			}
		})
	}
}

// TestProxyPerCallerBound (issue 28, item 4): --max-procs 4 gives each
// caller one process by default: the anonymous callers' second held call
// is refused, naming the limit, and counted in
// mrtr_bridge_refused_total{limit="per_caller"}.
func TestProxyPerCallerBound(t *testing.T) {
	url, logs := startProxyCmd(t, "--metrics-addr", "127.0.0.1:0", "--max-procs", "4", "--upstream-env", testcmd.StdioServerEnv+"=legacy", "--", os.Args[0])
	metrics := testcmd.LogURL(t, logs, "mrtr metrics serving")
	if res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}}); e != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("pause: %v %v", res, e)
	}
	if _, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "b"}}); e == nil || !strings.Contains(string(e["message"]), "--max-procs-per-caller") {
		t.Fatalf("a second held call of the same caller: %v", e)
	}
	_, body := testcmd.GetHealth(t, metrics)
	for _, want := range []string{`mrtr_bridge_refused_total{limit="per_caller"} 1`, `mrtr_bridge_refused_total{limit="procs"} 0`, `mrtr_bridge_refused_total{limit="holds"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(logs.String(), `"limit":"--max-procs-per-caller"`) {
		t.Errorf("no warning of the refusal: %s", logs.String())
	}
}

// flakyCommand returns a file and the proxy's arguments for a command
// that is this test binary's stdio server of kind while the file exists,
// and otherwise exits 7 at once, saying "boom: missing config" on stderr.
// The file exists at first.
func flakyCommand(t *testing.T, kind string) (flag string, args []string) {
	t.Helper()
	flag = filepath.Join(t.TempDir(), "configured")
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `if [ -e "$FLAG" ]; then exec "$BIN"; fi; echo "boom: missing config" >&2; exit 7`
	return flag, []string{"--upstream-env", "FLAG=" + flag, "--upstream-env", "BIN=" + os.Args[0],
		"--upstream-env", testcmd.StdioServerEnv + "=" + kind, "--", "sh", "-c", script}
}

// TestProxyCrashLoop (issue 28, item 1): a command that served its first
// call and then exits before answering initialize, start after start,
// turns /readyz 503 ("crash_loop"), the log saying how it ended (exit
// status, the end of its stderr) and that starts back off; once it can
// start again, /readyz is 200 again.
func TestProxyCrashLoop(t *testing.T) {
	flag, cmd := flakyCommand(t, "legacy")
	url, logs := startProxyCmd(t, append([]string{"--warm", "1"}, cmd...)...)
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz at start: %d %s", code, body)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	// The call takes the warm process; the ones started to refill it exit.
	if res, e := testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "a"}}); e != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("pause: %v %v", res, e)
	}
	var body string
	eventually(t, "/readyz 503 in the crash loop", func() bool {
		var code int
		code, body = testcmd.GetHealth(t, base+"/readyz")
		return code == 503 && strings.Contains(body, `"upstream_starts":"crash_loop"`)
	})
	rec := exitRecord(logs.String(), "bridge: initialize the upstream")
	if !strings.Contains(rec.Exit, "exit status 7") || !strings.Contains(rec.StderrTail, "boom: missing config") {
		t.Fatalf("a failed start logged as %+v", rec)
	}
	if !strings.Contains(logs.String(), `"msg":"bridge: the upstream keeps failing to start: the next start waits"`) {
		t.Fatalf("no backoff in the log: %s", logs.String())
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "/readyz 200 once the command starts again", func() bool {
		var code int
		code, body = testcmd.GetHealth(t, base+"/readyz")
		return code == 200
	})
	if !strings.Contains(logs.String(), "the crash loop is over") {
		t.Fatalf("no end of the crash loop in the log: %s", logs.String())
	}
}

// TestProxyCrashLoopModern (issue 28, item 1): the same for a 2026-07-28
// command: its shared child, started again after it exits, ends before
// answering anything each time; /readyz says crash_loop, and recovers.
func TestProxyCrashLoopModern(t *testing.T) {
	flag, cmd := flakyCommand(t, "modern")
	url, logs := startProxyCmd(t, append([]string{"--log-level", "debug"}, cmd...)...)
	base := strings.TrimSuffix(url, "/mcp")
	if _, e := testcmd.RPCPost(t, url, "tools/list", map[string]any{}); e != nil {
		t.Fatalf("tools/list: %v", e)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	// The shared child exits (killed here); every one started after it
	// exits before answering.
	killUpstreams(t, logs)
	eventually(t, "/readyz 503 in the crash loop", func() bool {
		testcmd.RPCPost(t, url, "tools/list", map[string]any{})
		code, body := testcmd.GetHealth(t, base+"/readyz")
		return code == 503 && strings.Contains(body, `"upstream_starts":"crash_loop"`)
	})
	if !strings.Contains(logs.String(), "boom: missing config") || !strings.Contains(logs.String(), "exit status 7") {
		t.Fatalf("the cause is not in the log: %s", logs.String())
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "/readyz 200 once the command starts again", func() bool {
		code, _ := testcmd.GetHealth(t, base+"/readyz")
		return code == 200
	})
}

// killUpstreams kills, by pid, every upstream process the proxy logged as
// started so far (--log-level debug).
func killUpstreams(t *testing.T, logs *testcmd.Buffer) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec struct {
			Msg string
			Pid int
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "bridge: upstream process started" && rec.Pid > 0 {
			_ = syscall.Kill(rec.Pid, syscall.SIGKILL)
		}
	}
}
