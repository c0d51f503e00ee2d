package supervise

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/testing/proctest"
)

// testSupervisor is stdio.Config.Supervisor with this test binary as mrtr
// (TestMain calls Init as main does).
func testSupervisor() []string { return []string{os.Args[0], Arg} }

// TestSuperviseRunsCommand: under the supervisor the command gets the
// child's stdin and stdout, does not see the supervisor's variable, and
// its exit status is the child's.
func TestSuperviseRunsCommand(t *testing.T) {
	script := `read l; echo "$l"; if env | grep -q '^` + stdio.SupervisorParentVar + `='; then exit 4; fi; exit 3`
	ch, err := stdio.Start(stdio.Config{Path: "sh", Args: []string{"-c", script},
		Supervisor: testSupervisor()})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Stop(context.Background())
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ch.Pid()))
	if !bytes.Contains(cmdline, []byte(Arg)) {
		t.Errorf("the child (pid %d) is not the supervisor: cmdline %q", ch.Pid(), cmdline)
	}
	if err := ch.Send([]byte(`{"jsonrpc":"2.0","method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-ch.Recv():
		if string(msg) != `{"jsonrpc":"2.0","method":"ping"}` {
			t.Errorf("echoed %q", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no line back through the supervisor")
	}
	select {
	case <-ch.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor did not exit with its command")
	}
	var ee *exec.ExitError
	if !errors.As(ch.Err(), &ee) || ee.ExitCode() != 3 {
		t.Errorf("Err = %v, want exit status 3 (4: the command saw %s)", ch.Err(), stdio.SupervisorParentVar)
	}
}

// TestSuperviseEndsAsCommand: the supervisor ends as its command did, so
// the proxy reads the end of a supervised command as it would the
// command's own: killed by the same signal (SIGTERM included, which the
// supervisor catches), or the same exit status (137 included: a shell
// whose child was killed says so, and that is no signal of its own).
func TestSuperviseEndsAsCommand(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   string // exec.ExitError.String()
	}{
		{`kill -KILL $$`, "signal: killed"},
		{`kill -TERM $$`, "signal: terminated"},
		{`kill -SEGV $$`, "signal: segmentation fault"},
		{`exit 137`, "exit status 137"},
		{`exit 0`, ""},
	} {
		ch, err := stdio.Start(stdio.Config{Path: "sh", Args: []string{"-c", tc.script}, Supervisor: testSupervisor()})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch.Done():
		case <-time.After(10 * time.Second):
			ch.Stop(context.Background())
			t.Fatalf("%s: the supervisor did not end with its command", tc.script)
		}
		got := ""
		var ee *exec.ExitError
		if errors.As(ch.Err(), &ee) {
			got = ee.String()
		} else if ch.Err() != nil {
			got = ch.Err().Error()
		}
		if got != tc.want {
			t.Errorf("sh -c %q under the supervisor ended with %q, want %q", tc.script, got, tc.want)
		}
	}
}

// TestSuperviseKillsGroupWhenParentDies: when the thread that started the
// supervisor exits (the parent-death signal fires as when the proxy dies),
// the supervisor kills the command and what the command started, in its
// group or gone to a session of its own (setsid).
func TestSuperviseKillsGroupWhenParentDies(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	script := pidsScript(pidFile) + `exec sleep 600`
	env := append(os.Environ(), stdio.SupervisorParentVar+"="+strconv.Itoa(os.Getpid()))
	started := make(chan *exec.Cmd)
	release := make(chan struct{})
	onDyingThread(func() {
		cmd := exec.Command(os.Args[0], Arg, "/bin/sh", "sh", "-c", script)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			close(started)
			return
		}
		started <- cmd
		<-release
	})
	cmd := <-started
	if cmd == nil {
		return
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}()

	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < 3 && time.Now().Before(deadline) {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			pids = nil
			for _, f := range strings.Fields(string(b)) {
				p, _ := strconv.Atoi(f)
				pids = append(pids, p)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) != 3 {
		t.Fatalf("the command did not write its pids")
	}
	defer func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL) // the test failed: leave nothing
		}
	}()
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not running before the parent died", p)
		}
	}
	close(release)
	select {
	case err := <-waited:
		waited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("supervisor ended with %v, want killed by SIGKILL (its group kill)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor outlived its parent thread by 10 s")
	}
	deadline = time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(p) {
			t.Errorf("pid %d (the command, its child, its child in a session of its own) outlived the supervisor's parent", p)
		}
	}
}

// TestSuperviseKillsWhatLeftTheGroup: when the command exits, and when
// Stop comes to killing a command that ignores SIGTERM, what it started
// goes with it even when it left the process group (setsid), which the
// proxy's group kill misses.
func TestSuperviseKillsWhatLeftTheGroup(t *testing.T) {
	// The command says the pid of what it started in a session of its
	// own once that one wrote it (to $F).
	escapee := `F=` + filepath.Join(t.TempDir(), "pid") + `; setsid sh -c '` + proctest.OuterPID + `echo $pid > $0.tmp; mv $0.tmp $0; exec sleep 600' $F & ` +
		`while [ ! -s $F ]; do sleep 0.01; done; echo "{\"pid\":$(cat $F)}"; rm $F; `
	for _, tc := range []struct{ name, script string }{
		{"the command exits", escapee + `exit 0`},
		{"Stop kills the command", `trap '' TERM; ` + escapee + `while :; do sleep 1; done`},
	} {
		ch, err := stdio.Start(stdio.Config{Path: "sh", Args: []string{"-c", tc.script}, Supervisor: testSupervisor(),
			StopGrace: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		select {
		case msg := <-ch.Recv():
			var m struct{ Pid int }
			if json.Unmarshal(msg, &m) != nil || m.Pid <= 0 {
				t.Fatalf("%s: the command said %q", tc.name, msg)
			}
			pid = m.Pid
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the command said nothing", tc.name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ch.Stop(ctx) // at once when the command exits
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s: pid %d, started by the command in a session of its own, outlived it", tc.name, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// pidsScript is sh that starts a sleep in the background and another in a
// session of its own (setsid), then writes to file the pids of the shell,
// the first sleep and the second, as this test's /proc names them.
func pidsScript(file string) string {
	sleep := `'` + proctest.OuterPID + `echo $pid > $0; exec sleep 600'`
	return `sh -c ` + sleep + ` ` + file + `.1 & setsid sh -c ` + sleep + ` ` + file + `.2 & ` + proctest.OuterPID + `echo $pid > ` + file + `.0; ` +
		`while [ ! -s ` + file + `.1 ] || [ ! -s ` + file + `.2 ]; do sleep 0.01; done; ` +
		`cat ` + file + `.0 ` + file + `.1 ` + file + `.2 > ` + file + `.tmp; mv ` + file + `.tmp ` + file + `; `
}

// TestSuperviseRefusesWithoutProxy: run by hand (no parent variable), the
// supervisor mode starts nothing.
func TestSuperviseRefusesWithoutProxy(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	var stderr bytes.Buffer
	code := supervise([]string{"/bin/sh", "sh", "-c", "touch " + marker}, []string{"PATH=/usr/bin:/bin"}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "internal") {
		t.Errorf("supervise without %s = %d, %q; want 2 and a refusal", stdio.SupervisorParentVar, code, stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// onDyingThread runs f in a goroutine locked to a thread that is not the
// process's main thread, and never unlocked: the thread exits when f
// returns, which fires the parent-death signal of the children it
// started. (A goroutine locked to the main thread that returns leaves the
// thread parked, not ended, so that one is handed over.)
func onDyingThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() == os.Getpid() {
			// Holding the main thread, the next goroutine gets another.
			done := make(chan struct{})
			onDyingThread(func() { defer close(done); f() })
			<-done
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
}

// alive reports whether pid exists and is not a zombie (a zombie has
// exited; it waits only for whoever reaps it), as the supervisor reads it.
func alive(pid int) bool {
	_, ok := readProc(pid)
	return ok
}

// FuzzParseStat: whatever a process names itself (its comm, up to 16
// bytes of its choosing), parseStat reads the kernel's fields after it.
func FuzzParseStat(f *testing.F) {
	f.Add("sleep", 4242, 17, 4240)
	f.Add("a) Z 1 1 (", 7, 1, 1)
	f.Add(") R 0 0", 1, 0, 0)
	f.Fuzz(func(t *testing.T, comm string, pid, ppid, pgrp int) {
		if len(comm) > 16 || ppid < 0 || pgrp < 0 {
			return
		}
		stat := fmt.Sprintf("%d (%s) S %d %d 4240 0 -1 4194560 113 0 0 0", pid, comm, ppid, pgrp)
		p, ok := parseStat(stat)
		if !ok || p.ppid != ppid || p.pgrp != pgrp {
			t.Fatalf("parseStat(%q) = %+v, %v; want ppid %d, pgrp %d", stat, p, ok, ppid, pgrp)
		}
		zombie := fmt.Sprintf("%d (%s) Z %d %d 0", pid, comm, ppid, pgrp)
		if _, ok := parseStat(zombie); ok {
			t.Fatalf("parseStat(%q) took a zombie for a live process", zombie)
		}
		parseStat(comm) // any bytes: no panic
	})
}

// TestSuperviseCommandCannotEscape pins issue 35 item 7: a command of the
// supervisor's own uid killed its supervisor (kill -9 $PPID), and what it
// had started in a session of its own (setsid) then outlived the proxy's
// death. The command now runs in a PID namespace of its own under an
// init of the supervisor's: the kill does not reach the supervisor, and
// the proxy's death (its thread's, here) takes the escapee with it. As
// root the namespace is a PID namespace alone; as another user (proctest.Nobody,
// when the test runs as root) a user namespace too, that maps the uid to
// itself.
func TestSuperviseCommandCannotEscape(t *testing.T) {
	type run struct {
		name string
		bin  string
		cred *syscall.Credential
	}
	runs := []run{{"as this user", os.Args[0], nil}}
	if os.Geteuid() == 0 {
		runs = append(runs, run{"as nobody", proctest.ExposedBinary(t), &syscall.Credential{Uid: proctest.Nobody, Gid: proctest.Nobody}})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "mrtr-escape-") // t.TempDir's parent is closed to nobody
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "pid")
			script := `F=` + file + `; setsid sh -c '` + proctest.OuterPID + `echo $pid > $0.tmp; mv $0.tmp $0; exec sleep 600' $F & ` +
				`while [ ! -s $F ]; do sleep 0.01; done; kill -9 $PPID; kill -KILL $PPID; echo $? > $F.killed; exec sleep 600`
			sup, waited, release := superviseOnDyingThread(t, r.bin, r.cred, script)
			var escapee int
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := os.Stat(file + ".killed"); err == nil {
					b, _ := os.ReadFile(file)
					escapee, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if escapee <= 0 {
				t.Fatal("the command did not start its escapee and kill its parent within 10 s")
			}
			defer syscall.Kill(escapee, syscall.SIGKILL) // the test failed: leave nothing
			if !alive(sup) {
				t.Errorf("kill -9 $PPID of the command killed its supervisor (pid %d)", sup)
			}
			close(release) // the proxy dies
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				t.Fatal("the supervisor outlived its parent thread by 10 s")
			}
			deadline = time.Now().Add(10 * time.Second)
			for alive(escapee) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if alive(escapee) {
				t.Errorf("pid %d, started by the command in a session of its own before it killed its parent, outlived the proxy", escapee)
			}
		})
	}
}

// superviseOnDyingThread starts bin as the supervisor of sh -c script, as
// cred when set, from a thread that exits when release is closed (the
// proxy's death, as the parent-death signal sees it). It returns the
// supervisor's pid and a channel closed once it is reaped.
func superviseOnDyingThread(t *testing.T, bin string, cred *syscall.Credential, script string, extraEnv ...string) (int, <-chan struct{}, chan struct{}) {
	t.Helper()
	env := append(append(os.Environ(), stdio.SupervisorParentVar+"="+strconv.Itoa(os.Getpid())), extraEnv...)
	started := make(chan *exec.Cmd)
	release := make(chan struct{})
	onDyingThread(func() {
		cmd := exec.Command(bin, Arg, "/bin/sh", "sh", "-c", script)
		cmd.Env = env
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1, Credential: cred}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			close(started)
			return
		}
		started <- cmd
		<-release
	})
	cmd := <-started
	if cmd == nil {
		t.FailNow()
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	return cmd.Process.Pid, waited, release
}

// TestSuperviseClosesInheritedDescriptors pins issue 35 item 8: a
// descriptor the proxy inherited without close-on-exec (its own
// parent's, or one opened so) passed through the supervisor to the
// command. The supervisor closes every descriptor but 0-2 before it
// starts the command.
func TestSuperviseClosesInheritedDescriptors(t *testing.T) {
	fd, err := syscall.Open(os.Args[0], syscall.O_RDONLY, 0) // no O_CLOEXEC: every child inherits it
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeFD := func() {
		if !closed {
			syscall.Close(fd)
			closed = true
		}
	}
	defer closeFD()
	n := strconv.Itoa(fd)
	// [ is a builtin: /proc/self is the command's shell.
	script := `if [ -e /proc/self/fd/` + n + ` ]; then l=$(readlink /proc/self/fd/` + n + `); echo "{\"leaked\":\"$l\"}"; else echo '{"leaked":""}'; fi`
	ch, err := stdio.Start(stdio.Config{Path: "sh", Args: []string{"-c", script}, Supervisor: testSupervisor()})
	closeFD()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Stop(context.Background())
	select {
	case msg := <-ch.Recv():
		var m struct{ Leaked *string }
		if json.Unmarshal(msg, &m) != nil || m.Leaked == nil {
			t.Fatalf("the command said %q", msg)
		}
		if *m.Leaked != "" {
			t.Errorf("descriptor %s, inherited by the proxy, reached the command (%s)", n, *m.Leaked)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command said nothing")
	}
}

// TestCloseOnExecFrom: closeOnExecFrom marks every descriptor from its
// argument on close-on-exec, through close_range and through the
// /proc/self/fd fallback alike, and closes none.
func TestCloseOnExecFrom(t *testing.T) {
	fds := make([]int, 3)
	for i := range fds {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		fds[i] = fd
	}
	cloexec := func(fd int) bool {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 {
			t.Fatalf("fcntl(%d): %v (closed?)", fd, errno)
		}
		return r&syscall.FD_CLOEXEC != 0
	}
	closeOnExecFrom(fds[1])
	if cloexec(fds[0]) || !cloexec(fds[1]) || !cloexec(fds[2]) {
		t.Errorf("close_range: close-on-exec %v %v %v, want false true true", cloexec(fds[0]), cloexec(fds[1]), cloexec(fds[2]))
	}
	for _, fd := range fds {
		syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0)
	}
	closeOnExecFromProc(fds[1])
	if cloexec(fds[0]) || !cloexec(fds[1]) || !cloexec(fds[2]) {
		t.Errorf("/proc/self/fd: close-on-exec %v %v %v, want false true true", cloexec(fds[0]), cloexec(fds[1]), cloexec(fds[2]))
	}
}

// TestSuperviseStartsNothingOrphaned pins a survivor of issue 35's
// mutation audit: a supervisor whose parent is not the one the proxy
// named (the proxy died before the supervisor caught its parent-death
// signal) starts nothing and ends as if that signal had ended it.
func TestSuperviseStartsNothingOrphaned(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(os.Args[0], Arg, "/bin/sh", "sh", "-c", "touch "+marker)
	cmd.Env = append(os.Environ(), stdio.SupervisorParentVar+"=1") // not its parent: this test is
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGUSR1) {
		t.Errorf("the supervisor of a dead proxy ended with %v, want exit status %d", err, 128+int(syscall.SIGUSR1))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the supervisor of a dead proxy started its command")
	}
}

// TestSuperviseKillsWhatForksWhileKilled pins a survivor of issue 35's
// mutation audit: without a PID namespace (MRTR_SUPERVISOR_PIDNS=off, as
// where the kernel refuses one), the supervisor kills its descendants in
// passes until one finds none new, so what a process forks between the
// supervisor's reading of the process tree and its kill goes too. The
// command forks sleeps as fast as it can (3000 at most) when the proxy
// dies.
func TestSuperviseKillsWhatForksWhileKilled(t *testing.T) {
	const mark = "987654"
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	script := `i=0; while [ $i -lt 3000 ]; do sleep ` + mark + ` & i=$((i+1)); if [ $i = 20 ]; then echo > ` + ready + `; fi; done; wait`
	sup, waited, release := superviseOnDyingThread(t, os.Args[0], nil, script, supervisorPIDNSVar+"=off")
	t.Cleanup(func() { killMarked(mark) })
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release) // the proxy dies while the command forks
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor outlived its parent thread by 10 s")
	}
	deadline = time.Now().Add(10 * time.Second)
	left := marked(mark)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		left = marked(mark)
	}
	if len(left) > 0 {
		t.Errorf("%d sleeps the command (under supervisor %d) forked outlived the proxy: %v", len(left), sup, left[:min(len(left), 5)])
	}
}

// marked lists the live processes running "sleep MARK".
func marked(mark string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == "sleep\x00"+mark+"\x00" && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMarked SIGKILLs every process marked lists, until none is left.
func killMarked(mark string) {
	for range 100 {
		left := marked(mark)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadProcSkipsZombies pins a survivor of issue 35's mutation audit:
// a zombie (exited, not yet reaped) or a dead process is not live, so
// the supervisor neither counts it among its descendants nor waits for
// it.
func TestReadProcSkipsZombies(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := readProc(pid); ok {
		t.Errorf("readProc took the zombie %d for a live process", pid)
	}
	for _, stat := range []string{"7 (sh) Z 1 7 7 0", "7 (sh) X 1 7 7 0"} {
		if _, ok := parseStat(stat); ok {
			t.Errorf("parseStat(%q) took it for a live process", stat)
		}
	}
	if p, ok := parseStat("7 (sh) S 1 6 7 0"); !ok || p.ppid != 1 || p.pgrp != 6 {
		t.Errorf("parseStat of a sleeping process = %+v, %v", p, ok)
	}
}

// TestSuperviseInitStartsNothingOrphaned: the init of the command's
// namespace whose parent is not the supervisor that started it (that one
// died before the init's parent-death signal was set) starts nothing;
// with its parent the one named, it runs the command and reports its
// wait status on its descriptor. The init is run by unshare --fork, as
// pid 1 of a fresh PID namespace, its parent unshare.
func TestSuperviseInitStartsNothingOrphaned(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || exec.Command(unshare, "-Urp", "--fork", "true").Run() != nil {
		t.Skip("no unshare -Urp here")
	}
	for _, tc := range []struct {
		name, parent string // sh: unshare's pid is that of the shell that execs it
		ran          bool
	}{
		{"another parent", "1", false},
		{"its parent", "$$", true},
	} {
		marker := filepath.Join(t.TempDir(), "ran")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", `exec env `+stdio.SupervisorParentVar+`=`+tc.parent+` "$@"`, "sh",
			unshare, "-Urp", "--fork", os.Args[0], Arg, "/bin/sh", "sh", "-c", "touch "+marker+"; exit 3")
		cmd.ExtraFiles = []*os.File{w}
		cmd.Env = append(os.Environ(), supervisorInitVar+"=3")
		err = cmd.Run()
		w.Close()
		status, _ := io.ReadAll(r)
		r.Close()
		_, statErr := os.Stat(marker)
		if ran := statErr == nil; ran != tc.ran {
			t.Errorf("%s: the command ran: %v, want %v (%v)", tc.name, ran, tc.ran, err)
		}
		var ee *exec.ExitError
		switch {
		case tc.ran && (len(status) != 4 || syscall.WaitStatus(binary.LittleEndian.Uint32(status)).ExitStatus() != 3):
			t.Errorf("%s: reported %x, want the command's exit status 3", tc.name, status)
		case !tc.ran && (len(status) != 0 || !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGKILL)):
			t.Errorf("%s: ended with %v and reported %x, want exit status %d and nothing", tc.name, err, status, 128+int(syscall.SIGKILL))
		}
	}
}
