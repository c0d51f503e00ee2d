//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestSIGHUPReloadsKeyRing sends a real SIGHUP to this process while
// `mrtr serve` runs in it: with polling out of the way (--keys-poll 1h),
// the signal alone reloads the key file, and the new primary seals. A
// second SIGHUP with the file unchanged keeps the ring and says so.
func TestSIGHUPReloadsKeyRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := testcmd.GenKey(t, "key-a"), testcmd.GenKey(t, "key-b")
	testcmd.WriteRing(t, path, a)
	url, logs := startServe(t, "--keys", path, "--keys-poll", "1h")
	waitLog(t, logs, 0, "mrtr key ring reloads on change or SIGHUP", map[string]string{"file": path})
	c := mcpClient{t, url}
	inFlight, _ := c.pause()

	mark := len(logs.String())
	testcmd.WriteRing(t, path, b, a)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, mark, "mrtr key ring reloaded", map[string]string{"trigger": "SIGHUP", "primary": "key-b"})
	if _, kid := c.pause(); kid != "key-b" {
		t.Fatalf("sealed under %q after SIGHUP", kid)
	}
	c.complete(inFlight)

	mark = len(logs.String())
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitLog(t, logs, mark, "mrtr key ring unchanged", map[string]string{"trigger": "SIGHUP"})
}

// TestSIGHUPWithNothingToReload runs `mrtr serve` and `mrtr proxy` as
// processes of their own (this test binary as mrtr) with an inline
// ($MRTR_KEYS holding the JSON) or an ephemeral key ring, and sends each
// two SIGHUPs: SIGHUP's default action ends a process, and here there is
// no file to reload, so each signal must be answered by one log line
// saying so while the process keeps serving (it answers a request after
// the signals, and exits 0 at SIGTERM).
func TestSIGHUPWithNothingToReload(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("inline", nil)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := ring.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		keys string // $MRTR_KEYS
		args []string
		why  string
	}{
		{"serve inline", string(inline), []string{"serve"}, "inline in $MRTR_KEYS"},
		{"serve ephemeral", "", []string{"serve"}, "the key ring is ephemeral"},
		{"proxy inline", string(inline), []string{"proxy", "--upstream", "http://127.0.0.1:1/mcp"}, "inline in $MRTR_KEYS"},
		{"proxy ephemeral", "", []string{"proxy", "--upstream", "http://127.0.0.1:1/mcp"}, "the key ring is ephemeral"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startChild(t, map[string]string{"MRTR_KEYS": tc.keys}, append(tc.args, "--addr", "127.0.0.1:0", "--log-format", "json")...)
			const refused = "mrtr key ring reload refused: "
			for n := 1; n <= 2; n++ {
				if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				lines := p.waitLines(t, refused, n)
				if !strings.Contains(lines[n-1], tc.why) {
					t.Fatalf("SIGHUP %d: %q does not say why (%q)", n, lines[n-1], tc.why)
				}
			}
			resp, err := http.Get(p.url) // any HTTP answer: the process is serving
			if err != nil {
				t.Fatalf("after two SIGHUPs: %v\n%s", err, p.logs.String())
			}
			resp.Body.Close()
			if code := p.stop(t); code != 0 {
				t.Fatalf("exit %d after SIGTERM: %s", code, p.logs.String())
			}
			if got := len(p.lines(refused)); got != 2 {
				t.Fatalf("%d refusal lines for 2 SIGHUPs: %s", got, p.logs.String())
			}
		})
	}
}

// child is this test binary running as the mrtr command in a process of
// its own.
type child struct {
	cmd    *exec.Cmd
	logs   *testcmd.Buffer // stderr: the JSON log
	url    string          // its "mrtr serving" URL
	exited chan struct{}
	code   int // valid once exited is closed

	deadline time.Time // bounds every wait, against a hang
}

// startChild runs mrtr args in a new process with env on top of this
// process's environment without its MRTR_* and OTEL_* variables, and waits
// until it serves. The process is ended at cleanup by its pid if it still
// runs.
func startChild(t *testing.T, env map[string]string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MRTR_") && !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, helperEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &child{cmd: cmd, logs: new(testcmd.Buffer), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if err != nil && p.code == 0 {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	for p.url == "" {
		for _, line := range p.lines("mrtr serving") {
			var l struct{ URL string }
			json.Unmarshal([]byte(line), &l)
			p.url = l.URL
		}
		p.pause(t, "to serve")
	}
	return p
}

// lines returns the JSON log lines whose msg starts with prefix.
func (p *child) lines(prefix string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	for sc.Scan() {
		var l struct{ Msg string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(l.Msg, prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// waitLines waits until the log holds n lines whose msg starts with
// prefix, failing t at once if the process ends first.
func (p *child) waitLines(t *testing.T, prefix string, n int) []string {
	t.Helper()
	for {
		if l := p.lines(prefix); len(l) >= n {
			return l
		}
		p.pause(t, "to log "+strconvQuote(prefix))
	}
}

// pause waits a moment before looking again, failing t if the process
// has ended or a generous bound (no outcome depends on it) has passed.
func (p *child) pause(t *testing.T, what string) {
	t.Helper()
	if p.deadline.IsZero() {
		p.deadline = time.Now().Add(time.Minute)
	}
	select {
	case <-p.exited:
		t.Fatalf("mrtr %s exited (%s) instead of %s:\n%s", p.cmd.Args[1], p.cmd.ProcessState, what, p.logs.String())
	case <-time.After(10 * time.Millisecond):
	}
	if time.Now().After(p.deadline) {
		t.Fatalf("mrtr %s did not manage %s within a minute:\n%s", p.cmd.Args[1], what, p.logs.String())
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *child) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("mrtr %s still running a minute after SIGTERM:\n%s", p.cmd.Args[1], p.logs.String())
	}
	return p.code
}
