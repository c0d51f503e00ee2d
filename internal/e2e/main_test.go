package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	// repoRoot is the module root (it holds go.mod, scripts/ and conformance/).
	repoRoot string
	// mrtrBin is the mrtr binary built once by TestMain.
	mrtrBin string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if up := os.Getenv(reverseProxyEnv); up != "" {
		return serveReverseProxy(up) // a child of TestProxyCPU
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(repoRoot, "go.mod")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: no go.mod at %s: %v\n", repoRoot, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "mrtr-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	mrtrBin = filepath.Join(dir, "mrtr")
	args := []string{"build", "-o", mrtrBin}
	if raceEnabled() {
		// A server built like the tests catches data races that only the
		// harness's concurrent traffic provokes; startServe fails the test
		// that saw one.
		args = append(args, "-race")
	}
	args = append(args, "github.com/mrtr-go/mrtr/cmd/mrtr")
	build := exec.Command("go", args...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	return m.Run()
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// serverLog collects a server's stderr and reports the URL from its
// "mrtr serving" JSON line.
type serverLog struct {
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
	url     chan string
	found   bool
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	if l.found {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i]
		var rec struct {
			Msg string `json:"msg"`
			URL string `json:"url"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "mrtr serving" && rec.URL != "" {
			l.found = true
			l.partial = nil
			l.url <- rec.URL
			break
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// serverEnv is this process's environment without MRTR_* variables, so that
// a developer's settings (keys, auth, replay) never leak into a test server.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MRTR_") {
			env = append(env, kv)
		}
	}
	return env
}

// startServe runs `mrtr serve --addr 127.0.0.1:0 --log-format json` plus
// args and returns the URL of its /mcp endpoint. At cleanup it stops the
// process by its id (SIGTERM, then SIGKILL after 10 s) and fails the test if
// the server did not exit cleanly or reported a data race.
func startServe(t testing.TB, args ...string) string {
	t.Helper()
	full := append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	logs := &serverLog{url: make(chan string, 1)}
	cmd := exec.Command(mrtrBin, full...)
	cmd.Env = serverEnv()
	cmd.Stdout = logs
	cmd.Stderr = logs
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mrtr serve: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("mrtr serve (pid %d): SIGTERM: %v; killing", cmd.Process.Pid, err)
			_ = cmd.Process.Kill()
		}
		killed := false
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			killed = true
			_ = cmd.Process.Kill()
			<-exited
		}
		out := logs.String()
		switch {
		case killed:
			t.Errorf("mrtr serve (pid %d) did not stop within 10 s of SIGTERM; killed. Log tail:\n%s", cmd.Process.Pid, tail(out, 40))
		case waitErr != nil:
			t.Errorf("mrtr serve (pid %d) exited with %v after SIGTERM. Log tail:\n%s", cmd.Process.Pid, waitErr, tail(out, 40))
		}
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("mrtr serve (pid %d) reported a data race:\n%s", cmd.Process.Pid, out)
		}
		if t.Failed() {
			t.Logf("mrtr serve %s: log tail:\n%s", strings.Join(args, " "), tail(out, 60))
		}
	})

	select {
	case u := <-logs.url:
		if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/mcp") {
			t.Fatalf("mrtr serve logged url %q, want http://127.0.0.1:PORT/mcp", u)
		}
		return u
	case <-exited:
		t.Fatalf("mrtr serve exited before serving (%v):\n%s", waitErr, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("mrtr serve logged no \"mrtr serving\" line within 60 s:\n%s", logs.String())
	}
	return ""
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines omitted)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
