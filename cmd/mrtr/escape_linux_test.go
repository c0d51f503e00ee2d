package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/proctest"
)

// escapesMsg is the proxy's warning at start when its upstream command
// cannot run in a PID namespace of its own.
const escapesMsg = "mrtr proxy: the upstream command cannot run in a PID namespace of its own: a process it starts can kill its supervisor and then outlive the proxy"

// TestProxyWarnsEscapes pins the last part of issue 35 item 7: where the
// kernel refuses the command a PID namespace of its own, the proxy says
// at start that what the command starts can escape. The proxy runs in a
// user namespace (unshare -Ur) whose limits of user and PID namespaces
// are 0; where it starts the namespaces, it says nothing.
func TestProxyWarnsEscapes(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || exec.Command(unshare, "-Ur", "true").Run() != nil {
		t.Skip("no unshare -Ur here")
	}
	const limits = `echo 0 > /proc/sys/user/max_pid_namespaces && echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`
	for _, tc := range []struct {
		name   string
		script string
		warn   bool
	}{
		{"refused", limits, true},
		{"allowed", `exec "$0" "$@"`, false},
	} {
		p := runMrtr(t, unshare, nil, nil, "-Ur", "/bin/sh", "-c", tc.script, os.Args[0],
			"proxy", "--addr", "127.0.0.1:0", "--log-format", "json", "--", "/bin/sh", "-c", "exec sleep 600")
		p.waitLines(t, "mrtr proxy: waiting for the upstream command", 1)
		if got := len(p.lines(escapesMsg)) == 1; got != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.name, got, tc.warn, p.logs.String())
		}
	}
}

// TestProxyKill9TakesTheEscapee is TestSuperviseCommandCannotEscape
// through mrtr proxy itself, killed with SIGKILL: the command started a
// process in a session of its own, then did kill -9 $PPID; once the
// proxy is killed, that process is gone too. As nobody when the test
// runs as root, as the proxy's uid otherwise (a user namespace then).
func TestProxyKill9TakesTheEscapee(t *testing.T) {
	bin, cred := os.Args[0], (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		bin, cred = proctest.ExposedBinary(t), &syscall.Credential{Uid: proctest.Nobody, Gid: proctest.Nobody}
	}
	dir, err := os.MkdirTemp("", "mrtr-escape-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pid")
	script := `F=` + file + `; setsid sh -c '` + proctest.OuterPID + `echo $pid > $0.tmp; mv $0.tmp $0; exec sleep 600' $F & ` +
		`while [ ! -s $F ]; do sleep 0.01; done; kill -9 $PPID; echo escapee-started >&2; exec sleep 600`
	p := runMrtr(t, bin, cred, nil, "proxy", "--addr", "127.0.0.1:0", "--log-format", "json", "--", "/bin/sh", "-c", script)
	childSaid(t, p, "escapee-started")
	b, _ := os.ReadFile(file)
	escapee, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if escapee <= 0 || !proctest.Alive(escapee) {
		t.Fatalf("the escapee (%q) does not run", b)
	}
	defer syscall.Kill(escapee, syscall.SIGKILL) // the test failed: leave nothing
	if len(p.lines(escapesMsg)) != 0 {
		t.Skipf("no PID namespace for the command here:\n%s", p.logs.String())
	}
	p.cmd.Process.Kill()
	<-p.exited
	deadline := time.Now().Add(10 * time.Second)
	for proctest.Alive(escapee) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if proctest.Alive(escapee) {
		t.Errorf("pid %d, started by the command in a session of its own before it did kill -9 $PPID, outlived kill -9 of the proxy by 10 s", escapee)
	}
}
