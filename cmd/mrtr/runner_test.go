package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/runner"
)

// runnerApp runs `mrtr runner args` in-process with the environment
// environ; drain closed is the first signal, cancel the second.
type runnerApp struct {
	drain  chan struct{}
	cancel context.CancelFunc
	code   chan int
	stderr *testcmd.Buffer
}

func startRunnerApp(t *testing.T, environ []string, args ...string) *runnerApp {
	t.Helper()
	r := &runnerApp{drain: make(chan struct{}), code: make(chan int, 1), stderr: &testcmd.Buffer{}}
	a := &base.App{Stdin: strings.NewReader(""), Stdout: &testcmd.Buffer{}, Stderr: r.stderr, Getenv: func(string) string { return "" },
		Environ: func() []string { return environ }, Drain: r.drain}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.code <- run(ctx, a, append([]string{"runner"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(testcmd.Deadline):
			t.Errorf("mrtr runner still runs %v after its context ended", testcmd.Deadline)
		}
	})
	return r
}

// wait is the runner's exit status; it fails the test after 15 s.
func (r *runnerApp) wait(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		r.code <- c
		return c
	case <-time.After(15 * time.Second):
		t.Fatalf("mrtr runner did not exit within 15 s:\n%s", r.stderr.String())
		return -1
	}
}

// TestRunnerRefusesSecrets pins issue 35 item 2: the runner refuses
// --keys and --audit-key by name (exit 2), and any MRTR_* variable in its
// environment (exit 1), naming the variable, never its value.
func TestRunnerRefusesSecrets(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	base := []string{"--listen", sock, "--allow-uid", "4242"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keys", "keys.json"}, "mrtr runner: --keys: the runner holds no secret"},
		{[]string{"--keys=keys.json"}, "mrtr runner: --keys: the runner holds no secret"},
		{[]string{"-audit-key", "sign.key"}, "mrtr runner: --audit-key: the runner holds no secret"},
	} {
		code, out, errOut := runApp(t, append(append(append([]string{"runner"}, base...), tc.args...), "--", "cat")...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("mrtr runner %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	// After --, the words are the command's own.
	r := startRunnerApp(t, []string{"PATH=" + os.Getenv("PATH"), "MRTR_KEYS=v1-the-secret-ring-itself"}, append(base, "--", "cat", "--keys")...)
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d with MRTR_KEYS set, want 1:\n%s", code, r.stderr.String())
	}
	errOut := r.stderr.String()
	if !strings.Contains(errOut, "$MRTR_KEYS is set") || strings.Contains(errOut, "the-secret-ring") {
		t.Fatalf("stderr %q: want the variable named, never its value", errOut)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused runner created its socket: %v", err)
	}
}

// TestRunnerUsageErrors: without --listen, --allow-uid or a command the
// runner does not start (exit 2); a bad uid or group is named.
func TestRunnerUsageErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-uid", "1", "--", "cat"}, "--listen: is required"},
		{[]string{"--listen", sock, "--", "cat"}, "--allow-uid: is required"},
		{[]string{"--listen", sock, "--allow-uid", "1"}, "must follow --"},
		{[]string{"--listen", sock, "--allow-uid", "1", "--"}, "-- must be followed by the command"},
		{[]string{"--listen", sock, "--allow-uid", "no-such-user-here", "--", "cat"}, `"no-such-user-here" is no uid and no known user`},
		{[]string{"--listen", sock, "--allow-uid", "1", "--socket-group", "no-such-group-here", "--", "cat"}, `"no-such-group-here" is no gid`},
		{[]string{"--listen", sock, "--allow-uid", "1", "--max-children", "0", "--", "cat"}, "--max-children: 0 is below the minimum of 1"},
	} {
		code, _, errOut := runApp(t, append([]string{"runner"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || !strings.HasSuffix(errOut, "Run \"mrtr runner --help\" for its flags.\n") {
			t.Errorf("mrtr runner %v: exit %d, stderr %q; want 2, %q and the hint", tc.args, code, errOut, tc.want)
		}
	}
}

// TestRunnerFlagsHaveNoVariables: the runner's help names no MRTR_*
// variable (it refuses them all), and an MRTR_* twin of one of its flags
// is refused, not read.
func TestRunnerFlagsHaveNoVariables(t *testing.T) {
	_, out, _ := runApp(t, "runner", "--help")
	if strings.Contains(out, "$MRTR_") || !strings.Contains(out, "--allow-uid UID") || !strings.Contains(out, "--socket-group GROUP") {
		t.Fatalf("mrtr runner --help:\n%s", out)
	}
	_, out, _ = runApp(t, "--help")
	if !strings.Contains(out, "mrtr runner ") || !strings.Contains(out, "mrtr proxy --runner SOCKET") {
		t.Fatalf("mrtr --help lists no runner:\n%s", out)
	}
	r := startRunnerApp(t, []string{"MRTR_LISTEN=/tmp/x.sock"}, "--allow-uid", "4242", "--", "cat")
	if code := r.wait(t); code != 2 || !strings.Contains(r.stderr.String(), "--listen: is required") {
		t.Fatalf("exit %d:\n%s", code, r.stderr.String())
	}
}

// TestRunnerStartsAndDrains: the runner listens on a 0660 socket, says
// loudly at start that --allow-uid any leaves the socket's mode and group
// as the only control, and on the first signal with nothing open exits
// 0 at once, its socket removed.
func TestRunnerStartsAndDrains(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	r := startRunnerApp(t, []string{"PATH=" + os.Getenv("PATH")}, "--listen", sock, "--allow-uid", "any", "--log-format", "json", "--", "cat")
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(r.stderr.String(), "mrtr runner: listening"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no start line within 15 s:\n%s", r.stderr.String())
		}
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Perm() != runner.SocketMode || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi, err)
	}
	if !strings.Contains(r.stderr.String(), "the socket's mode (0660) and group are the only control") {
		t.Fatalf("--allow-uid any not said at start:\n%s", r.stderr.String())
	}
	close(r.drain)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d after the first signal:\n%s", code, r.stderr.String())
	}
	if !strings.Contains(r.stderr.String(), "mrtr runner drained: no connection open") {
		t.Fatalf("no drained line:\n%s", r.stderr.String())
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket outlived the runner: %v", err)
	}
}

// TestProxyRunnerConflicts pins issue 35 item 2: --runner and --upstream,
// --runner and a command after --, and --runner with --upstream-env are
// usage errors (exit 2); a runner that is not there stops the start
// with an error naming its socket.
func TestProxyRunnerConflicts(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runner", sock, "--upstream", "http://127.0.0.1:1/mcp"}, "--runner: and --upstream both name an upstream"},
		{[]string{"--runner", sock, "--", "cat"}, "--runner: and a command after -- both name an upstream"},
		{[]string{"--runner", sock, "--upstream-env", "A=b"}, "--upstream-env: has no effect with --runner"},
		{[]string{"--runner", sock, "--upstream-user", "nobody"}, "--upstream-user: is for an upstream that is a command"},
	} {
		code, _, errOut := runApp(t, append([]string{"proxy", "--addr", "127.0.0.1:0"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("mrtr proxy %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runAppEnv(t, map[string]string{"MRTR_RUNNER": sock}, "proxy", "--addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "no runner answers at the socket "+sock) {
		t.Errorf("$MRTR_RUNNER, no runner: exit %d, stderr %q; want 1 and the socket named", code, errOut)
	}
	for _, era := range []string{"auto", "legacy", "modern"} {
		code, _, errOut := runApp(t, "proxy", "--addr", "127.0.0.1:0", "--upstream-era", era, "--runner", sock)
		if code != 1 || !strings.Contains(errOut, "no runner answers at the socket "+sock) {
			t.Errorf("--upstream-era %s, no runner: exit %d, stderr %q; want 1 and the socket named", era, code, errOut)
		}
	}
}
