package e2e

import (
	"context"
	"fmt"
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

// TestProxyKill9LeavesNoOrphans: kill -9 of `mrtr proxy -- COMMAND` takes
// with it what the command started, not only the command: the command is
// run by a supervisor (mrtr __supervise) that kills its process group
// when the proxy dies. The command here is sh, which starts a sleep in the
// background and another in a session of its own (out of the group), and
// then becomes a third, as npx starts sh and node.
func TestProxyKill9LeavesNoOrphans(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	// Each writes its pid as this test's /proc names it (read, a shell
	// builtin, opens /proc/self/stat in the shell itself): in the
	// command's PID namespace $$ and $! are the namespace's.
	const self = `read -r s </proc/self/stat; echo ${s%%%% *}`
	script := fmt.Sprintf(`sh -c '`+self+` > $0; exec sleep 600' %[1]s.1 & setsid sh -c '`+self+` > $0; exec sleep 600' %[1]s.2 & `+
		self+` > %[1]s.0; while [ ! -s %[1]s.1 ] || [ ! -s %[1]s.2 ]; do sleep 0.01; done; `+
		`cat %[1]s.0 %[1]s.1 %[1]s.2 > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 600`, pidFile)

	logs := &serverLog{url: make(chan string, 1)}
	cmd := exec.Command(mrtrBin, "proxy", "--addr", "127.0.0.1:0", "--log-format", "json",
		"--upstream-era", "legacy", "--", "sh", "-c", script)
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logs, logs
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mrtr proxy: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var pids []int
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL) // the test failed: leave nothing behind
		}
		if t.Failed() {
			t.Logf("mrtr proxy log tail:\n%s", tail(logs.String(), 40))
		}
	})
	var url string
	select {
	case url = <-logs.url:
	case <-time.After(30 * time.Second):
		t.Fatal("mrtr proxy did not start serving within 30 s")
	}

	// A call starts a child (the bridge starts one per caller and call);
	// this one never answers, which is what it is for.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for len(pids) < 3 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pids = nil
			for _, f := range strings.Fields(string(b)) {
				if p, err := strconv.Atoi(f); err == nil {
					pids = append(pids, p)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) != 3 {
		t.Fatal("the upstream command did not start within 30 s (no pids written)")
	}
	for _, p := range pids {
		if !running(p) {
			t.Fatalf("pid %d is not running before the kill", p)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	exited <- nil // for the cleanup
	deadline = time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for running(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, p := range pids {
		if running(p) {
			what := [...]string{"the command (sh, then sleep)", "the command's background sleep", "the command's sleep in a session of its own"}[i]
			t.Errorf("pid %d, %s, outlived kill -9 of the proxy by 5 s", p, what)
		}
	}
}

// running reports whether pid exists and has not exited: a zombie has (it
// waits only for whoever reaps it, init here).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
