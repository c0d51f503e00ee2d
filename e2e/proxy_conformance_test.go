package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needEverything returns the upstream mrtr did not write: go-sdk's
// conformance everything-server at the go-sdk version of go.mod, which
// scripts/everything-setup.sh (`make deps`) installs. It skips t when that
// binary is missing or built from another version, or fails t when
// MRTR_REQUIRE_CONFORMANCE=1; it installs nothing.
func needEverything(t *testing.T) string {
	t.Helper()
	everythingSetup.need(t)
	return filepath.Join(repoRoot, "conformance", "bin", "everything-server")
}

// startEverything runs the everything-server on a loopback port
// (stateless for the 2026-07-28 wire, stateful for 2025-11-25) and
// returns its URL. It is stopped by its pid at cleanup.
func startEverything(t *testing.T, stateless bool) string {
	t.Helper()
	u, _ := startEverythingPID(t, stateless)
	return u
}

// startEverythingPID is startEverything that also returns the server's pid.
func startEverythingPID(t *testing.T, stateless bool) (string, int) {
	t.Helper()
	bin := needEverything(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-http="+addr, "-stateless="+strconv.FormatBool(stateless))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Wait until it accepts connections (readiness, not a timing check).
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("everything-server exited: %s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything-server not listening on %s after 30 s", addr)
		}
	}
	return "http://" + addr + "/mcp", cmd.Process.Pid
}

// scenarioDir is the harness's result folder name:
// server-<scenario>-<ISO timestamp with : and . as ->.
var scenarioDir = regexp.MustCompile(`^(?:server-)?(.*?)-\d{4}-\d{2}-\d{2}T`)

// proxyMRTRResults reads the checks of every input-required-result-*
// scenario under dir: the scenarios that ran, and their WARNING or
// FAILURE checks ("scenario [id] STATUS").
func proxyMRTRResults(t *testing.T, dir string) (ran map[string]bool, bad []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "server-input-required-result-*", "checks.json"))
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if m := scenarioDir.FindStringSubmatch(name); m != nil {
			name = m[1]
		}
		seen[name] = true
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Status string }
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			if c.Status == "WARNING" || c.Status == "FAILURE" {
				bad = append(bad, name+" ["+c.ID+"] "+c.Status)
			}
		}
	}
	return seen, bad
}

// TestProxyConformance2026: the everything-server behind the proxy passes
// the 2026-07-28 requirements, and all 14 MRTR scenarios pass through the
// sealing with one warning, the one the proxy gives on purpose
// (proxyIgnoredAnswers).
func TestProxyConformance2026(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startProxied(t, startEverything(t, true))
	dir := t.TempDir()
	runHarness(t, url, []string{"CONFORMANCE_OUT_DIR=" + dir}, "req-2026").mustPass(t)
	ran, bad := proxyMRTRResults(t, dir)
	for name := range mrtrScenarioChecks() {
		if !ran[name] {
			t.Errorf("scenario %s did not run", name)
		}
	}
	if len(bad) != 1 || bad[0] != proxyIgnoredAnswers {
		t.Fatalf("warnings or failures in input-required-result-* scenarios through the proxy: %q, want exactly %q", bad, proxyIgnoredAnswers)
	}
}

// proxyIgnoredAnswers is the one SHOULD the proxy departs from on purpose.
// The scenario sends answers on a first call, without requestState, and
// expects a stateless upstream to use them. The proxy never forwards
// answers no sealed token covers (they would have no single use, expiry,
// binding or round cap: a spent token's answers could run the upstream
// again), so the upstream sees a first call and asks; a client that
// echoes the proxy's token completes in the next round.
const (
	proxyIgnoredAnswersID = "sep-2322-ignore-unexpected-params"
	proxyIgnoredAnswers   = "input-required-result-ignore-extra-params [" + proxyIgnoredAnswersID + "] WARNING"
)

// TestProxyConformanceDraft: every scenario introduced in 2026-07-28,
// through the proxy; the script's gate fails on any WARNING in an
// input-required-result-* scenario but proxyIgnoredAnswers.
func TestProxyConformanceDraft(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startProxied(t, startEverything(t, true))
	r := runHarness(t, url, []string{"CONFORMANCE_MRTR_ALLOW=" + proxyIgnoredAnswersID}, "draft")
	r.mustPass(t)
	m := regexp.MustCompile(`MRTR gate ok: (\d+) input-required-result-`).FindStringSubmatch(r.output)
	if m == nil || m[1] != "14" {
		t.Fatalf("want \"MRTR gate ok: 14\", got %q. Output tail:\n%s", m, tail(r.output, 40))
	}
}

// TestProxyConformance2025: a stateful everything-server behind the same
// kind of proxy passes the 2025-11-25 requirements (sessions, GET
// streams, DELETE, server-to-client requests) through it.
func TestProxyConformance2025(t *testing.T) {
	needHarness(t)
	t.Parallel()
	url := startProxied(t, startEverything(t, false))
	runHarness(t, url, nil, "req-2025").mustPass(t)
}

// rawCall posts one 2026-07-28 tools/call and returns the decoded final
// message (JSON or the last response event).
func rawCall(t *testing.T, url, tool, state string, responses map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"] = state
	}
	if responses != nil {
		params["inputResponses"] = responses
	}
	return rawRPC(t, url, "tools/call", tool, params)
}

// rawRPC posts one 2026-07-28 request of method (Mcp-Name name) with
// params and returns the decoded final message (JSON or the last response
// event).
func rawRPC(t *testing.T, url, method, name string, params map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	msg := b
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(d, `"id"`) {
				msg = []byte(strings.TrimSpace(d))
			}
		}
	}
	var out map[string]any
	if err := json.Unmarshal(msg, &out); err != nil {
		t.Fatalf("reply is not JSON (%v): %s", err, b)
	}
	return out
}

// startProxied runs `mrtr proxy --upstream upstream` (the binary TestMain
// built, memory single-use store, ephemeral keys) on a loopback port and
// returns its /mcp URL. At cleanup it stops the process by its id and
// fails the test if it did not exit cleanly or reported a data race.
func startProxied(t *testing.T, upstream string, args ...string) string {
	t.Helper()
	u, _ := startProxiedPID(t, upstream, args...)
	return u
}

// startProxiedPID is startProxied that also returns the proxy's pid.
func startProxiedPID(t *testing.T, upstream string, args ...string) (string, int) {
	t.Helper()
	return startProxyPID(t, append([]string{"--upstream", upstream}, args...)...)
}

// startProxy runs `mrtr proxy` with args (after its listening and log
// flags) and returns its /mcp URL; it is stopped by its pid at cleanup.
func startProxy(t *testing.T, args ...string) string {
	t.Helper()
	u, _ := startProxyPID(t, args...)
	return u
}

// startProxyPID is startProxy that also returns the proxy's pid.
func startProxyPID(t *testing.T, args ...string) (string, int) {
	t.Helper()
	u, pid, _ := startProxyLog(t, args...)
	return u, pid
}

// startProxyLog is startProxyPID that also returns the proxy's log.
func startProxyLog(t testing.TB, args ...string) (string, int, *serverLog) {
	t.Helper()
	p := startProxyProc(t, args...)
	return p.url, p.pid, p.logs
}

// proxyProc is a `mrtr proxy` process of startProxyProc.
type proxyProc struct {
	url    string
	pid    int
	logs   *serverLog
	exited chan struct{} // closed once it is reaped; then waitErr is set
	// waitErr is how it ended (nil: status 0); read after exited.
	waitErr error
}

// startProxyProc runs `mrtr proxy` with args and waits for it to serve.
// At cleanup it gets SIGTERM and must exit 0 within 10 s: on its own
// when nothing is held or in flight; when its drain starts with calls
// the test left held, a second SIGTERM stops it at once.
func startProxyProc(t testing.TB, args ...string) *proxyProc {
	t.Helper()
	full := append([]string{"proxy", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	p := &proxyProc{logs: &serverLog{url: make(chan string, 1)}, exited: make(chan struct{})}
	cmd := exec.Command(mrtrBin, full...)
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mrtr proxy: %v", err)
	}
	p.pid = cmd.Process.Pid
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		seen := false // the drain's start line
	wait:
		for {
			select {
			case <-p.exited:
				break wait
			case <-deadline:
				_ = cmd.Process.Kill()
				<-p.exited
				t.Errorf("mrtr proxy (pid %d) did not stop within 10 s of SIGTERM", cmd.Process.Pid)
				break wait
			case <-tick.C:
				if seen {
					continue
				}
				if d, ok := drainStart(p.logs.String()); ok {
					seen = true
					if d.Held+d.InFlight > 0 {
						t.Logf("mrtr proxy (pid %d): the test left %d calls held, %d in flight: second SIGTERM", cmd.Process.Pid, d.Held, d.InFlight)
						_ = cmd.Process.Signal(syscall.SIGTERM)
					}
				}
			}
		}
		out := p.logs.String()
		if p.waitErr != nil {
			t.Errorf("mrtr proxy exited with %v. Log tail:\n%s", p.waitErr, tail(out, 40))
		}
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("mrtr proxy reported a data race:\n%s", out)
		}
		if t.Failed() {
			t.Logf("mrtr proxy log tail:\n%s", tail(out, 60))
		}
	})
	select {
	case p.url = <-p.logs.url:
		return p
	case <-p.exited:
		t.Fatalf("mrtr proxy exited before serving (%v):\n%s", p.waitErr, p.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("mrtr proxy logged no \"mrtr serving\" line within 60 s:\n%s", p.logs.String())
	}
	return nil
}

// drainLine is the log line of a drain's start.
type drainLine struct {
	Held     int `json:"held"`
	InFlight int `json:"in_flight"`
}

// drainStart finds the line of a drain's start in a JSON log.
func drainStart(logs string) (drainLine, bool) {
	for _, l := range strings.Split(logs, "\n") {
		var d struct {
			Msg string `json:"msg"`
			drainLine
		}
		if json.Unmarshal([]byte(l), &d) == nil && strings.HasPrefix(d.Msg, "mrtr draining: ") {
			return d.drainLine, true
		}
	}
	return drainLine{}, false
}
