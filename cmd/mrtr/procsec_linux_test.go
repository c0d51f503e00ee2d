package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/supervise"
	"github.com/mrtr-go/mrtr/internal/testing/proctest"
	"github.com/mrtr-go/mrtr/reqstate"
)

// runMrtr runs this test binary as mrtr with args and env (on top of this
// process's environment without its MRTR_* variables), as cred when set,
// and returns it running; it is killed at cleanup if it still runs.
func runMrtr(t *testing.T, bin string, cred *syscall.Credential, env map[string]string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MRTR_") && !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, helperEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
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
	return p
}

// childSaid returns what the proxy's child wrote on stderr, one entry a
// line, in order, once it has written done.
func childSaid(t *testing.T, p *child, done string) []string {
	t.Helper()
	for {
		if said := childLines(t, p); slices.Contains(said, done) {
			return said
		}
		p.pause(t, "to log "+strconvQuote(done))
	}
}

// childLines returns what the upstream command wrote to stderr so far,
// each line as the proxy logged it under stdio.ChildRecordMsg.
func childLines(t *testing.T, p *child) []string {
	t.Helper()
	var said []string
	for _, line := range strings.Split(p.logs.String(), "\n") {
		var l struct {
			Msg    string
			Stream string
			Child  struct{ Msg string }
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Stream == "stderr" {
			if l.Msg != stdio.ChildRecordMsg {
				t.Errorf("a child's line logged under %q, want %q", l.Msg, stdio.ChildRecordMsg)
			}
			said = append(said, l.Child.Msg)
		}
	}
	return said
}

// TestProxyNotDumpable pins issue 27 item 6: a command upstream running as
// the proxy's own user read /proc/<proxy>/environ, $MRTR_KEYS with it.
// The proxy makes itself non-dumpable before its first child starts, so
// the kernel refuses that read to a process of the same uid. Root may
// read any process's environ (CAP_SYS_PTRACE), so when the test runs as
// root the proxy and its child both run as nobody.
func TestProxyNotDumpable(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("environ", nil)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := ring.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	bin, cred := os.Args[0], (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		bin, cred = proctest.ExposedBinary(t), &syscall.Credential{Uid: proctest.Nobody, Gid: proctest.Nobody}
	}
	// The supervisors between them (mrtr __supervise, and the init of the
	// command's PID namespace) are not dumpable either (issue 35 item 7:
	// a command that could write their memory could escape them).
	const script = proxyPID + `tr '\0' '\n' < /proc/$pp/environ >&2; ` +
		`if [ $pp != $sup ]; then { tr '\0' '\n' < /proc/$sup/environ; } 2>&1 | sed 's/^/supervisor: /' >&2; fi; ` +
		`echo environ-read-done >&2; exec sleep 600` // lives on: one that exits before the era probe stops the proxy
	p := runMrtr(t, bin, cred, map[string]string{"MRTR_KEYS": string(inline), "PROCSEC_MARK": "mark-in-the-environ"},
		"proxy", "--addr", "127.0.0.1:0", "--log-format", "json", "--", "/bin/sh", "-c", script)
	said := childSaid(t, p, "environ-read-done")
	denied, supervisor := false, 0
	for _, s := range said {
		if sup, ok := strings.CutPrefix(s, "supervisor: "); ok {
			if !strings.Contains(sup, "Permission denied") {
				t.Errorf("the child read its supervisor's environment: %.40q…", sup)
			}
			supervisor++
			continue
		}
		if strings.HasPrefix(s, "MRTR_KEYS=") || strings.Contains(s, "mark-in-the-environ") {
			t.Fatalf("the child read the proxy's environment: %.40q…", s)
		}
		denied = denied || strings.Contains(s, "Permission denied")
	}
	if !denied {
		t.Fatalf("the child was not refused /proc/<proxy>/environ (%d lines on its stderr)", len(said))
	}
	if supervise.Argv() != nil && supervisor == 0 {
		t.Fatal("the child tried nothing of its supervisor's environment")
	}
}

// proxyPID sets $pp, in a command the proxy runs, to the proxy's pid, and
// $sup to the command's parent: the proxy, or the supervisor (mrtr
// __supervise, internal/supervise) and, in the command's PID namespace, the
// namespace's init. Pids as the /proc mounted here names them (the
// namespace's $PPID is 1): read from /proc/self/stat by the shell itself
// (read is a builtin), then up the parents while they are supervisors.
const proxyPID = `read -r s </proc/self/stat; s=${s##*) }; s=${s#* }; pp=${s%% *}; sup=$pp; ` +
	`while tr '\0' ' ' < /proc/$pp/cmdline | grep -q ` + supervise.Arg + `; do read -r s </proc/$pp/stat; s=${s##*) }; s=${s#* }; pp=${s%% *}; done; `

// TestUpstreamUser pins the rest of issue 27 item 6: with --upstream-user
// the command runs as that user, who can read neither the proxy's key
// file (mode 0600, the proxy's) nor its environment, whatever the
// dumpable flag. It needs root.
func TestUpstreamUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--upstream-user needs root")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // only the file's mode keeps it
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys.json")
	k := testcmd.GenKey(t, "upstream-user")
	testcmd.WriteRing(t, keys, k)
	script := `id -u >&2; id -g >&2; cat "$0" >&2; ` + proxyPID + `tr '\0' '\n' < /proc/$pp/environ >&2; echo checks-done >&2; exec sleep 600` // lives on: one that exits before the era probe stops the proxy
	p := runMrtr(t, os.Args[0], nil, map[string]string{"PROCSEC_MARK": "mark-in-the-environ"},
		"proxy", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--upstream-user", "65534:65534",
		"--", "/bin/sh", "-c", script, keys)
	said := childSaid(t, p, "checks-done")
	if len(said) < 2 || said[0] != "65534" || said[1] != "65534" {
		t.Fatalf("the child's uid and gid: %.2q, want 65534 and 65534", said)
	}
	denied := 0
	for _, s := range said {
		for _, secret := range append(testcmd.SecretForms(k), "mark-in-the-environ", `"secret"`) {
			if strings.Contains(s, secret) {
				t.Fatalf("the child read the key file or the proxy's environment: %.40q…", s)
			}
		}
		if strings.Contains(s, "Permission denied") {
			denied++
		}
	}
	if denied != 2 {
		t.Fatalf("%d of the two reads were refused", denied)
	}
}

// TestUpstreamUserRefused: --upstream-user is refused, with a message
// saying why, when the proxy does not run as root, and with an upstream
// that is not a command.
func TestUpstreamUserRefused(t *testing.T) {
	bin, cred := os.Args[0], (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		bin, cred = proctest.ExposedBinary(t), &syscall.Credential{Uid: proctest.Nobody, Gid: proctest.Nobody}
	}
	for _, tc := range []struct {
		cred *syscall.Credential
		args []string
		want string
	}{
		{cred, []string{"--", "/bin/true"}, "--upstream-user needs the proxy to run as root"},
		{nil, []string{"--upstream", "http://127.0.0.1:1/mcp"}, "--upstream-user: is for an upstream that is a command"},
	} {
		if os.Geteuid() != 0 && tc.cred == nil && strings.Contains(tc.want, "root") {
			continue
		}
		b := bin
		if tc.cred == nil {
			b = os.Args[0]
		}
		p := runMrtr(t, b, tc.cred, nil, append([]string{"proxy", "--addr", "127.0.0.1:0", "--upstream-user", "nobody"}, tc.args...)...)
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			t.Fatalf("mrtr proxy %q still runs a minute later; want it refused at start:\n%s", tc.args, p.logs.String())
		}
		if p.code == 0 || !strings.Contains(p.logs.String(), tc.want) {
			t.Errorf("mrtr proxy %q: exit %d, said %q; want an error saying %q", tc.args, p.code, p.logs.String(), tc.want)
		}
	}
}
