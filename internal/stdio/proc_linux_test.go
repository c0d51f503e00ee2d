package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procStat returns the state and parent pid of pid from /proc, ok false
// when there is no such process (not even a zombie).
func procStat(t *testing.T, pid int) (state string, ppid int, ok bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return "", 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// procUID returns the real uid of pid, from /proc.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(b, []byte("\nUid:"))
	f := strings.Fields(string(rest))
	if len(f) == 0 {
		t.Fatalf("no Uid in /proc/%d/status", pid)
	}
	uid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// assertReaped fails unless pid, a child of this process, is gone: not
// running, not a zombie.
func assertReaped(t *testing.T, pid int) {
	t.Helper()
	if state, ppid, ok := procStat(t, pid); ok && ppid == os.Getpid() {
		t.Errorf("child %d still there, state %s", pid, state)
	}
}

// waitGone waits until pid, not a child of this process, has died: gone,
// or a zombie waiting for whoever it was reparented to.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		state, _, ok := procStat(t, pid)
		if !ok || state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still alive (state %s)", pid, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A child that exits on its own does not leave its group behind.
func TestExitKillsLeftovers(t *testing.T) {
	c := start(t, "orphaner", Config{})
	var m struct{ Grandchild int }
	if err := json.Unmarshal(recv(t, c), &m); err != nil || m.Grandchild == 0 {
		t.Fatalf("no grandchild pid: %v", err)
	}
	if err := c.Send([]byte(`{"bye":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, c); err != nil {
		t.Fatalf("Err = %v", err)
	}
	assertReaped(t, c.Pid())
	waitGone(t, m.Grandchild)
}

// The proxy dies by SIGKILL, without any cleanup: its child dies too.
func TestParentDeathKillsChild(t *testing.T) {
	parentDeath(t, "parent", os.Getuid())
}

// A child run as another user (Config.User) dies with the proxy too: the
// kernel clears the parent-death signal when credentials change, so it
// must be set after the change (Go's fork does).
func TestParentDeathKillsChildOfOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	parentDeath(t, "parent-of-nobody", 65534)
}

// parentDeath runs the helper mode (which starts a child and prints its
// pid), checks that the child runs as uid, kills the helper by SIGKILL and
// waits for the child to die.
func parentDeath(t *testing.T, mode string, uid int) {
	t.Helper()
	parent := exec.Command(self(t))
	parent.Env = append(os.Environ(), helperVar+"="+mode)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("parent helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := procStat(t, pid); !ok {
		t.Fatalf("child %d not running before its parent dies", pid)
	}
	if got := procUID(t, pid); got != uid {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("child %d runs as uid %d, want %d", pid, got, uid)
	}
	parent.Process.Kill()
	parent.Wait()
	waitGone(t, pid)
}

// The thread that called Start exits (a goroutine locked to it returns):
// the child must live on, since Linux sends Pdeathsig when the thread that
// forked the child exits.
func TestStartThreadExitDoesNotKillChild(t *testing.T) {
	type result struct {
		c   *Child
		tid int
		err error
	}
	ch := make(chan result)
	never := make(chan struct{})
	var r result
	for r.c == nil {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
			tid := syscall.Gettid()
			if tid == os.Getpid() {
				// Go never ends the main thread: keep it, try again on another.
				ch <- result{}
				<-never
			}
			c, err := Start(Config{Path: self(t), Env: []string{helperVar + "=echo", "GORACE=atexit_sleep_ms=0"}})
			if err != nil {
				t.Error(err)
			}
			ch <- result{c, tid, err}
		}()
		if r = <-ch; r.err != nil {
			t.FailNow()
		}
	}
	c := r.c
	t.Cleanup(func() {
		stopWithin(t, c, context.Background())
		assertReaped(t, c.Pid())
	})
	// Wait for the thread to be gone.
	deadline := time.Now().Add(patience)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", r.tid)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the locked thread did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Send([]byte(`{"alive":true}`)); err != nil {
		t.Fatalf("Send after the starting thread exited: %v", err)
	}
	if got := string(recv(t, c)); got != `{"alive":true}` {
		t.Fatalf("got %s", got)
	}
}

// threads is this process's thread count.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(b, []byte("\nThreads:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		t.Fatalf("Threads of /proc/self/status: %v", err)
	}
	return n
}

// A running child holds no thread of the proxy: its exit is awaited in the
// runtime's poller (pidfd), and every child is forked from one thread. A
// thread per child would cost about 48 KiB of runtime stacks each, the
// most of what a bridged session cost (issue 20).
func TestChildrenHoldNoThread(t *testing.T) {
	const n = 16
	log := slog.New(slog.DiscardHandler) // stderr read too
	first := start(t, "echo", Config{Logger: log})
	if err := first.Send([]byte(`{"n":0}`)); err != nil {
		t.Fatal(err)
	}
	recv(t, first)
	before := threads(t)
	for i := range n {
		c := start(t, "echo", Config{Logger: log})
		msg := fmt.Sprintf(`{"n":%d}`, i+1)
		if err := c.Send([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := string(recv(t, c)); got != msg {
			t.Fatalf("got %s, want %s", got, msg)
		}
	}
	// The runtime may add a thread or two of its own meanwhile (Go never
	// ends one); a thread per child would add n.
	if grown := threads(t) - before; grown > n/4 {
		t.Fatalf("%d children running added %d threads, want at most %d", n, grown, n/4)
	}
}

// The spawner's thread outlives the last child it started: it may have
// forked other children of the process before the spawner locked it (a
// test's redis-server, anyone's os/exec with Pdeathsig), which its end
// would kill.
func TestSpawnerThreadKept(t *testing.T) {
	c, err := Start(Config{Path: self(t), Env: []string{helperVar + "=echo", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := spawn.tid.Load()
	if tid == 0 {
		t.Fatal("no spawner thread")
	}
	stopWithin(t, c, context.Background())
	assertReaped(t, c.Pid())
	// The thread would end as its goroutine returns; give that goroutine
	// every chance to run before looking.
	for range 100 {
		runtime.Gosched()
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
		t.Fatalf("the spawner's thread %d ended with its last child: %v", tid, err)
	}
}

// A child leads a process group of its own (its pid is the group id), so
// that Stop's signals reach what it started and nothing else.
func TestChildLeadsItsGroup(t *testing.T) {
	c := start(t, "echo", Config{})
	pgid, err := syscall.Getpgid(c.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid != c.Pid() || pgid == syscall.Getpgrp() {
		t.Fatalf("child %d is in process group %d (ours is %d), want a group of its own", c.Pid(), pgid, syscall.Getpgrp())
	}
}

// Once the child is reaped its pid, the group id, may be any new
// process's: no signal is sent to it any more, by Stop or otherwise.
func TestNoSignalAfterReap(t *testing.T) {
	c := start(t, "exit", Config{})
	if err := c.Send([]byte(`{"bye":1}`)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, c)
	if c.signal(false) || c.signal(true) {
		t.Fatalf("a signal went to the group id %d of a reaped child: by now it may be another process's", c.Pid())
	}
}
