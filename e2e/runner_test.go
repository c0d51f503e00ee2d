//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The uid and group the runner of these tests runs as: unused on the
// test machine, and never the proxy's (root).
const (
	runnerUID = 64123
	runnerGID = 64100
)

// runnerProc is an `mrtr runner` of startRunner.
type runnerProc struct {
	sock   string
	cmd    *exec.Cmd
	logs   *serverLog
	exited chan struct{}
	err    error
}

// runnerHome is a directory of the test only the runner's uid writes in
// (its HOME, working directory and socket directory), reachable by
// everyone.
func runnerHome(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the runner runs as another uid than the proxy")
	}
	dir, err := os.MkdirTemp("", "mrtr-runner-e2e-") // not t.TempDir: its parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{dir, filepath.Join(dir, "home"), filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(dir, "home"), filepath.Join(dir, "run")} {
		if err := os.Chown(d, runnerUID, runnerGID); err != nil {
			t.Fatal(err)
		}
	}
	// The binary TestMain built sits in a 0700 directory: a copy the
	// runner's uid can run.
	in, err := os.Open(mrtrBin)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(dir, "mrtr"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startRunner runs `mrtr runner` as runnerUID, allowing the proxy's uid
// (root), its socket in dir/run, with args before -- and command after;
// it waits until it listens. At cleanup it gets SIGTERM and must exit 0.
func startRunner(t *testing.T, dir string, args []string, command ...string) *runnerProc {
	t.Helper()
	r := &runnerProc{sock: filepath.Join(dir, "run", "runner.sock"), logs: &serverLog{url: make(chan string, 1)}, exited: make(chan struct{})}
	full := append([]string{"runner", "--listen", r.sock, "--allow-uid", "0", "--socket-group", "64100", "--log-format", "json", "--log-level", "debug"}, args...)
	r.cmd = exec.Command(filepath.Join(dir, "mrtr"), append(append(full, "--"), command...)...)
	r.cmd.Env = append(serverEnv(), "HOME="+filepath.Join(dir, "home"))
	r.cmd.Dir = filepath.Join(dir, "home")
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: &syscall.Credential{Uid: runnerUID, Gid: runnerGID, Groups: []uint32{}}}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start mrtr runner: %v", err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
			if r.err != nil {
				t.Errorf("mrtr runner exited with %v:\n%s", r.err, tail(r.logs.String(), 40))
			}
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
			t.Errorf("mrtr runner (pid %d) did not stop within 15 s of SIGTERM:\n%s", r.cmd.Process.Pid, tail(r.logs.String(), 40))
		}
		if out := r.logs.String(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("mrtr runner reported a data race:\n%s", out)
		}
		if t.Failed() {
			t.Logf("mrtr runner log tail:\n%s", tail(r.logs.String(), 60))
		}
	})
	waitLog(t, r.logs, "mrtr runner: listening; each connection runs the command")
	return r
}

// count is how many records of r's log have message msg.
func (r *runnerProc) count(msg string) int {
	return strings.Count(r.logs.String(), `"msg":"`+msg+`"`)
}

// TestRunnerBridgeOtherUID pins issue 35 item 2: server-everything (a
// 2025-11-25 server) run by `mrtr runner` as another uid than the proxy,
// the proxy with --runner SOCKET and no process of its own: a warm child
// (a connection to the runner) serves a 2026-07-28 client's call, whose
// elicitation round is sealed and completes while the proxy drains
// (SIGTERM with the call held); the proxy then exits 0 on its own, and the
// runner, its connections closed, has stopped every child.
func TestRunnerBridgeOtherUID(t *testing.T) {
	node, script := serverEverything(t)
	dir := runnerHome(t)
	r := startRunner(t, dir, nil, node, script, "stdio")
	keys := filepath.Join(t.TempDir(), "keys.json")
	mnMrtr(t, "keygen", "--out", keys)
	// One process at most, kept warm: the call can only be served by the
	// warm child, and none starts for it.
	p := startProxyProc(t, "--keys", keys, "--upstream-era", "legacy", "--warm", "1", "--max-procs", "1", "--drain-timeout", "2m", "--runner", r.sock)
	waitLog(t, p.logs, "bridge: upstream session started")
	started := r.count("mrtr runner: child started")
	if started < 1 {
		t.Fatalf("the warm child is no child of the runner:\n%s", r.logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, e := bridgeRPC(t, ctx, p.url, "", "trigger-elicitation-request", map[string]any{}, "", nil)
	if e != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("the call: %v %v", res, e)
	}
	if started != 1 {
		t.Errorf("%d children started before the call, want 1 (the warm one; the start's check starts none)", started)
	}
	if n := r.count("mrtr runner: child started"); n != started {
		t.Fatalf("%d children started for the call, want none (the warm one serves it)", n-started)
	}
	var st string
	var irs map[string]json.RawMessage
	json.Unmarshal(res["requestState"], &st)
	json.Unmarshal(res["inputRequests"], &irs)
	if !strings.HasPrefix(st, "v1.") || len(irs) != 1 {
		t.Fatalf("not one sealed round: %v", res)
	}
	answers := map[string]any{}
	for k := range irs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7}}
	}

	// The drain, with the call held.
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := readyzOf(t, p.url)
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"drain":"draining"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after SIGTERM: %d %s, want 503 draining", code, body)
		}
	}
	if exitedWithin(t, p, time.Second) {
		t.Fatalf("the proxy exited while it holds a call:\n%s", tail(p.logs.String(), 30))
	}
	res, e = bridgeRPC(t, ctx, p.url, "", "trigger-elicitation-request", map[string]any{}, st, answers)
	if e != nil || !strings.Contains(string(res["content"]), "Ada Lovelace") {
		t.Fatalf("the resume during the drain: %v %v", res, e)
	}
	if !exitedWithin(t, p, 30*time.Second) {
		t.Fatalf("the proxy still runs 30 s after its last held call ended:\n%s", tail(p.logs.String(), 30))
	}
	if logs := p.logs.String(); !strings.Contains(logs, `"msg":"mrtr drained: no call held or in flight"`) {
		t.Errorf("no line saying the proxy drained:\n%s", tail(logs, 30))
	}
	// Its connections closed, the runner stops their children.
	for deadline := time.Now().Add(15 * time.Second); r.count("mrtr runner: child ended") < r.count("mrtr runner: child started"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d children started, %d ended 15 s after the proxy exited:\n%s", r.count("mrtr runner: child started"), r.count("mrtr runner: child ended"), tail(r.logs.String(), 40))
		}
	}
	if !strings.Contains(r.logs.String(), `"stream":"stderr"`) {
		t.Errorf("the child's stderr is not in the runner's log:\n%s", r.logs.String())
	}
	if strings.Contains(r.logs.String(), "connection refused: its peer's uid is not allowed") {
		t.Errorf("the runner refused the proxy:\n%s", r.logs.String())
	}
	if strings.Contains(p.logs.String(), "upstream command runs as root") {
		t.Errorf("the proxy started a command of its own:\n%s", p.logs.String())
	}
}

// TestRunnerChildCannotReadKeys pins the point of issue 35 item 2: a
// child of the runner cannot read a file only the proxy's uid can (its
// key ring, 0600), while it reads one that is everyone's.
func TestRunnerChildCannotReadKeys(t *testing.T) {
	dir := runnerHome(t)
	keysDir := filepath.Join(dir, "proxy")
	if err := os.Mkdir(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(keysDir, "keys.json")
	mnMrtr(t, "keygen", "--out", keys)
	if fi, err := os.Stat(keys); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key ring: %v %v, want 0600", fi, err)
	}
	ring, _ := os.ReadFile(keys)
	public := filepath.Join(keysDir, "public.txt")
	if err := os.WriteFile(public, []byte("everyone reads this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, dir, nil, "/bin/sh", "-c", `cat "$0"; cat "$1"; echo "{\"read\":$?}"`, public, keys)
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("{}\n")); err != nil { // the first message starts the child
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []string
	for s := bufio.NewScanner(c); s.Scan(); {
		got = append(got, s.Text())
	}
	out := strings.Join(got, "\n")
	if !strings.Contains(out, "everyone reads this") || !strings.Contains(out, `{"read":1}`) {
		t.Fatalf("the child's output %q: want the public file and a failed read of the key ring", out)
	}
	for deadline := time.Now().Add(15 * time.Second); r.count("mrtr runner: child ended") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child did not end:\n%s", r.logs.String())
		}
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "Permission denied") {
		t.Errorf("no Permission denied from cat in the runner's log:\n%s", logs)
	}
	var k struct {
		Keys []struct {
			Secret string `json:"secret"`
			Key    string `json:"key"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(ring, &k)
	for _, key := range k.Keys {
		for _, s := range []string{key.Secret, key.Key} {
			if s != "" && (strings.Contains(out, s) || strings.Contains(logs, s)) {
				t.Fatal("the key ring's secret reached the runner's child")
			}
		}
	}
	if strings.Contains(out, `"keys"`) || strings.Contains(logs, `"keys":[`) {
		t.Fatalf("the key ring's contents reached the runner's child: %s", out)
	}
}

// runnerEcho is a connection to r's child `sh -c 'echo $$; exec cat'`:
// its first message starts the child, which answers with its pid, then
// echoes.
type runnerEcho struct {
	c   net.Conn
	s   *bufio.Scanner
	pid int
}

func dialEcho(t *testing.T, r *runnerProc) *runnerEcho {
	t.Helper()
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &runnerEcho{c: c, s: bufio.NewScanner(c)}
	if !e.echoes(t) {
		t.Fatal("the child does not echo")
	}
	return e
}

// echoes sends a message and reports whether it comes back (after the
// pid, the first time).
func (e *runnerEcho) echoes(t *testing.T) bool {
	t.Helper()
	e.c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := e.c.Write([]byte(`{"n":1}` + "\n")); err != nil {
		return false
	}
	for e.s.Scan() {
		if e.pid == 0 {
			n, err := strconv.Atoi(e.s.Text())
			if err != nil {
				t.Fatalf("the child's first line %q is no pid", e.s.Text())
			}
			e.pid = n
			continue
		}
		return e.s.Text() == `{"n":1}`
	}
	return false
}

// gone waits up to 10 s for pid to end, and reports whether it did.
func gone(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if _, rest, _ := strings.Cut(string(b), ") "); strings.HasPrefix(rest, "Z") {
			return true
		}
	}
	return false
}

// runnerExitedWithin reports whether r exits within d.
func runnerExitedWithin(r *runnerProc, d time.Duration) bool {
	select {
	case <-r.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// TestRunnerDrainSignals pins the runner's drain (issue 35 item 2): on
// SIGTERM it accepts no new connection (its socket is gone) but serves
// an open one; a second SIGTERM, or --drain-timeout, then stops it at
// once, exit 0, the child stopped. Killed with SIGKILL, its children die
// with it (the supervisor).
func TestRunnerDrainSignals(t *testing.T) {
	// The child's pid as this test's /proc names it: the supervisor may
	// start the command in a PID namespace of its own, where $$ is the
	// namespace's number; /proc/self, opened by the shell itself (a brace
	// group runs in the current shell), is the host's view.
	cmd := []string{"/bin/sh", "-c", `{ while read -r k v; do if [ "$k" = Pid: ]; then echo "$v"; fi; done; } </proc/self/status; exec cat`}
	for _, tc := range []struct {
		name, timeout, want string
		second              bool
	}{
		{"second signal", "10m", "second signal", true},
		{"drain timeout", "2s", "--drain-timeout", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRunner(t, runnerHome(t), []string{"--drain-timeout", tc.timeout}, cmd...)
			e := dialEcho(t, r)
			if uid := uidOf(t, e.pid); uid != strconv.Itoa(runnerUID) {
				t.Fatalf("the child runs as uid %s, want the runner's %d", uid, runnerUID)
			}
			if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitLog(t, r.logs, "mrtr runner draining: no new connection; serving the open ones until they end (a second SIGTERM or SIGINT stops at once)")
			if _, err := net.Dial("unix", r.sock); err == nil {
				t.Fatal("a new connection was accepted during the drain")
			}
			if !e.echoes(t) {
				t.Fatal("the open connection is not served during the drain")
			}
			if runnerExitedWithin(r, time.Second) {
				t.Fatalf("the runner exited with a connection open:\n%s", r.logs.String())
			}
			if tc.second {
				if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			if !runnerExitedWithin(r, 10*time.Second) {
				t.Fatalf("the runner still runs 10 s later:\n%s", r.logs.String())
			}
			if r.err != nil || !strings.Contains(r.logs.String(), "drain cut short") || !strings.Contains(r.logs.String(), tc.want) {
				t.Fatalf("exit %v, log:\n%s", r.err, r.logs.String())
			}
			if !gone(e.pid) {
				t.Fatalf("the child (pid %d) outlived the runner", e.pid)
			}
		})
	}
	t.Run("kill -9", func(t *testing.T) {
		r := startRunner(t, runnerHome(t), nil, cmd...)
		e := dialEcho(t, r)
		if err := r.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-r.exited
		r.err = nil // killed on purpose
		if !gone(e.pid) {
			t.Fatalf("the child (pid %d) outlived the runner's SIGKILL", e.pid)
		}
	})
}

// TestRunnerModernDirect: a 2026-07-28 command (mrtr serve --stdio, run
// by the runner as another uid) behind `mrtr proxy --runner` with the era
// probed: the probe's connection is the shared child and serves the
// first call, whose pause the proxy seals and whose resume completes.
func TestRunnerModernDirect(t *testing.T) {
	dir := runnerHome(t)
	r := startRunner(t, dir, nil, filepath.Join(dir, "mrtr"), "serve", "--stdio")
	p := startProxyProc(t, "--runner", r.sock)
	if !strings.Contains(p.logs.String(), "the upstream speaks 2026-07-28") {
		t.Fatalf("the era probe through the runner did not find a 2026-07-28 server:\n%s", p.logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, e := modernRPC(t, ctx, p.url, "deploy", map[string]any{"service": "api", "env": "staging"}, "", nil)
	var st string
	json.Unmarshal(res["requestState"], &st)
	if e != nil || string(res["resultType"]) != `"input_required"` || !strings.HasPrefix(st, "v1.") {
		t.Fatalf("deploy: %v %v, want a sealed pause", res, e)
	}
	res, e = modernRPC(t, ctx, p.url, "deploy", map[string]any{"service": "api", "env": "staging"}, st,
		map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}})
	if e != nil || !strings.Contains(string(res["content"]), "deployed api to staging") {
		t.Fatalf("the resume: %v %v", res, e)
	}
	if n := r.count("mrtr runner: child started"); n != 1 {
		t.Fatalf("%d children started, want 1 (the probe's, which serves the calls)", n)
	}
}

// modernRPC is one 2026-07-28 tools/call with the headers a 2026-07-28
// server requires: its result, or its error.
func modernRPC(t *testing.T, ctx context.Context, url, tool string, args map[string]any, state string, answers map[string]any) (map[string]json.RawMessage, *rpcError) {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = answers
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return rpcResponse(t, tool, raw)
}

// uidOf is the real uid of process pid.
func uidOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return ""
}
