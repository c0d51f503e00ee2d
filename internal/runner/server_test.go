//go:build linux

package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a runner on a socket of its own, serving until the test
// ends.
type testServer struct {
	*Server
	path string
	logs *syncBuf
}

// uid returns a pointer to u (Options.self).
func uid(u uint32) *uint32 { return &u }

// serve starts a Server of opts on a fresh socket; a zero Child runs cat
// (an echo), and its children get a short stop grace.
func serve(t *testing.T, opts Options) *testServer {
	t.Helper()
	if opts.Child.Path == "" {
		opts.Child.Path = "/usr/bin/cat"
	}
	if opts.Child.StopGrace == 0 {
		opts.Child.StopGrace = 200 * time.Millisecond
	}
	logs := &syncBuf{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir, err := os.MkdirTemp("", "runner-test-") // not t.TempDir: peers of other uids search its parent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "runner.sock")
	ln, err := Listen(path, -1)
	if err != nil {
		t.Fatal(err)
	}
	s := New(opts)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Shutdown(ctx)
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{Server: s, path: path, logs: logs}
}

// dial connects to ts, failing the test if it cannot.
func (ts *testServer) dial(t *testing.T) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), ts.path, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// recv is the next message of c, or "" once c has ended; it fails the
// test after 10 s (a hang).
func recv(t *testing.T, c *Conn) (string, bool) {
	t.Helper()
	select {
	case m, ok := <-c.Recv():
		return string(m), ok
	case <-time.After(10 * time.Second):
		t.Fatal("no message and no end of the connection within 10 s")
		return "", false
	}
}

// echoes reports whether a message sent on c comes back.
func echoes(t *testing.T, c *Conn) bool {
	t.Helper()
	if err := c.Send([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err != nil {
		return false
	}
	m, ok := recv(t, c)
	return ok && m == `{"jsonrpc":"2.0","id":1,"method":"ping"}`
}

// TestRunnerRefusesOwnUID: a peer of the runner's own uid (the uid its
// children share) is refused even when --allow-uid lists it, and so is
// one of the overflow uid, even with AllowAny; no child starts.
func TestRunnerRefusesOwnUID(t *testing.T) {
	for _, opts := range []Options{
		{AllowUIDs: []uint32{0}},                 // the tests run as root: self 0
		{AllowAny: true},                         // self 0 again
		{AllowUIDs: []uint32{0}, self: uid(0)},   // the seam agrees
		{AllowAny: true, AllowUIDs: []uint32{0}}, // both
	} {
		if os.Getuid() != 0 && opts.self == nil {
			opts.AllowUIDs = []uint32{uint32(os.Getuid())}
		}
		ts := serve(t, opts)
		c := ts.dial(t)
		if echoes(t, c) {
			t.Fatalf("%+v: a peer of the runner's own uid got a child", opts)
		}
		if logs := ts.logs.String(); !strings.Contains(logs, MsgRefusedPeer) || !strings.Contains(logs, "the runner's own uid") || strings.Contains(logs, "child started") {
			t.Fatalf("%+v: log:\n%s", opts, logs)
		}
	}
}

// TestRunnerAllowList: a peer's uid must be listed (the runner seen as
// uid 4242 here, the test as root is a peer of another uid); AllowAny
// takes any but the runner's own and the overflow uid.
func TestRunnerAllowList(t *testing.T) {
	me := uint32(os.Getuid())
	for _, tc := range []struct {
		opts Options
		want bool
	}{
		{Options{AllowUIDs: []uint32{me}, self: uid(4242)}, true},
		{Options{AllowUIDs: []uint32{5, me, 7}, self: uid(4242)}, true},
		{Options{AllowUIDs: []uint32{5}, self: uid(4242)}, false},
		{Options{self: uid(4242)}, false},
		{Options{AllowAny: true, self: uid(4242)}, true},
		{Options{AllowUIDs: []uint32{me}, self: uid(me)}, false},
	} {
		ts := serve(t, tc.opts)
		c := ts.dial(t)
		if got := echoes(t, c); got != tc.want {
			t.Errorf("allow %v any %v self %d, peer %d: served %v, want %v\n%s", tc.opts.AllowUIDs, tc.opts.AllowAny, *tc.opts.self, me, got, tc.want, ts.logs.String())
		}
		if !tc.want && !strings.Contains(ts.logs.String(), MsgRefusedPeer) {
			t.Errorf("allow %v: refused without the warning:\n%s", tc.opts.AllowUIDs, ts.logs.String())
		}
	}
}

// TestRunnerPeerOfAnotherUID: real peers of other uids, told by the
// kernel: one listed is served, one not listed and the overflow uid 65534
// (allowed by AllowAny) are refused.
func TestRunnerPeerOfAnotherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a peer as another uid")
	}
	exe := exposedCopy(t)
	ts := serve(t, Options{AllowUIDs: []uint32{64123}, self: nil})
	ts2 := serve(t, Options{AllowAny: true})
	for _, s := range []*testServer{ts, ts2} {
		// The peers reach the socket through its directory and group.
		if err := os.Chmod(filepath.Dir(s.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(s.path, -1, 64100); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ts   *testServer
		uid  uint32
		want string
	}{
		{ts, 64123, `{"hello":"from another uid"}`},
		{ts, 64124, "closed"},
		{ts2, 65534, "closed"},
		{ts2, 64125, `{"hello":"from another uid"}`},
	} {
		cmd := exec.Command(exe)
		cmd.Env = []string{helperVar + "=connect", socketVar + "=" + tc.ts.path}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: 64100, Groups: []uint32{}}}
		out, err := cmd.Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("peer uid %d: %q (%v), want %q\n%s", tc.uid, got, err, tc.want, tc.ts.logs.String())
		}
	}
	if !strings.Contains(ts2.logs.String(), "the overflow uid") {
		t.Errorf("the overflow uid's refusal not logged:\n%s", ts2.logs.String())
	}
}

// exposedCopy copies the test binary where any uid can run it.
func exposedCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "runner-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(dir, "peer")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunnerMaxChildren: beyond MaxChildren a connection is closed at
// once, with the warning; once a child ends, a new one is served.
func TestRunnerMaxChildren(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), MaxChildren: 2})
	a, b := ts.dial(t), ts.dial(t)
	if !echoes(t, a) || !echoes(t, b) {
		t.Fatalf("the first two connections were not served:\n%s", ts.logs.String())
	}
	c := ts.dial(t)
	if echoes(t, c) {
		t.Fatal("a third connection got a child with --max-children 2")
	}
	if logs := ts.logs.String(); !strings.Contains(logs, MsgRefusedLimit) || !strings.Contains(logs, `"max_children":2`) {
		t.Fatalf("no warning of the limit:\n%s", logs)
	}
	_ = a.Close(context.Background())
	for deadline := time.Now().Add(10 * time.Second); ts.Running() > 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d children still run 10 s after a connection closed", ts.Running())
		}
	}
	if d := ts.dial(t); !echoes(t, d) {
		t.Fatal("a connection after one ended was not served")
	}
}

// pidChild is a command that prints its pid, then ignores stdin's end
// and SIGTERM: only a stop of its group ends it.
func pidChild() stdio.Config {
	return stdio.Config{Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo $$; exec sleep 600`}}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// waitGone waits up to 10 s for pid to end.
func waitGone(t *testing.T, pid int, why string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child (pid %d) still runs 10 s after %s", pid, why)
		}
	}
}

// TestRunnerChildStoppedWhenConnectionCloses: closing the connection
// stops the child, even one that ignores stdin's end and SIGTERM; a
// child that exits closes the connection.
func TestRunnerChildStoppedWhenConnectionCloses(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: pidChild()})
	c := ts.dial(t)
	if err := c.Send([]byte(`{}`)); err != nil { // the first message starts the child
		t.Fatal(err)
	}
	line, ok := recv(t, c)
	pid, err := strconv.Atoi(line)
	if !ok || err != nil {
		t.Fatalf("the child's first line %q, %v", line, ok)
	}
	if !alive(pid) {
		t.Fatalf("pid %d is not running", pid)
	}
	_ = c.Close(context.Background())
	waitGone(t, pid, "its connection closed")

	ts2 := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: stdio.Config{Path: "/bin/sh", Args: []string{"-c", "echo '\"bye\"'; exit 3"}}})
	c2 := ts2.dial(t)
	_ = c2.Send([]byte(`{}`))
	if m, ok := recv(t, c2); !ok || m != `"bye"` {
		t.Fatalf("first message %q %v", m, ok)
	}
	if _, ok := recv(t, c2); ok {
		t.Fatal("a message after the child's last")
	}
	select {
	case <-c2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a child that exited is not closed")
	}
	if err := c2.Send([]byte(`{}`)); !errors.Is(err, stdio.ErrExited) {
		t.Fatalf("Send after the end: %v, want ErrExited", err)
	}
}

// TestRunnerDrain: Shutdown stops accepting at once, serves an open
// connection until it ends, and, once its context ends, stops the
// children left.
func TestRunnerDrain(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242)})
	c := ts.dial(t)
	if !echoes(t, c) {
		t.Fatal("not served")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- ts.Shutdown(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ts.path); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket file is still there 10 s into the drain")
		}
	}
	if _, err := Dial(context.Background(), ts.path, DialOptions{}); !errors.Is(err, ErrNoRunner) {
		t.Fatalf("a dial during the drain: %v, want ErrNoRunner", err)
	}
	if !echoes(t, c) {
		t.Fatal("the open connection is not served during the drain")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a connection is open", err)
	default:
	}
	_ = c.Close(context.Background())
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown after the last connection ended: %v", err)
	}

	// Cut short: the children left are stopped.
	ts2 := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: pidChild()})
	c2 := ts2.dial(t)
	_ = c2.Send([]byte(`{}`))
	line, _ := recv(t, c2)
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("first line %q", line)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	if err := ts2.Shutdown(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown cut short: %v, want context.Canceled", err)
	}
	if alive(pid) {
		t.Fatalf("the child (pid %d) outlived a drain cut short", pid)
	}
	if _, ok := recv(t, c2); ok {
		t.Fatal("the connection of a stopped child is open")
	}
}

// TestListenSocketModeGroup: the socket is 0660 of the group given; a
// stale socket is replaced, a live one or a path that is no socket is
// refused and left alone.
func TestListenSocketModeGroup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	gid := os.Getgid()
	if os.Getuid() == 0 {
		gid = 64100 // root may give any group
	}
	ln, err := Listen(path, gid)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
		t.Fatalf("socket %v group %d, want a socket 0660 of group %d", fi.Mode(), st.Gid, gid)
	}
	if _, err := Listen(path, -1); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second Listen while one listens: %v, want ErrInUse", err)
	}
	// A stale one: a socket file nobody listens at.
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the stale socket is not there to test: %v", err)
	}
	ln, err = Listen(path, -1)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("closing the listener leaves its socket: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file, -1); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("Listen on a regular file: %v, want ErrNotSocket", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("Listen touched a file that is not a socket")
	}
	if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(dir, "link"), -1); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("Listen on a symlink: %v, want ErrNotSocket", err)
	}
}

// TestRunnerLongLine: a peer line over the message limit closes the
// connection and stops the child.
func TestRunnerLongLine(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: stdio.Config{Path: "/usr/bin/cat", MaxMessageBytes: 1024}})
	c := ts.dial(t)
	_ = c.Send([]byte(`"` + strings.Repeat("x", 2000) + `"`))
	if _, ok := recv(t, c); ok {
		t.Fatal("an over-long line was relayed")
	}
	if !strings.Contains(ts.logs.String(), "over the message limit") {
		t.Fatalf("not logged:\n%s", ts.logs.String())
	}
}

// TestRunnerNoChildBeforeFirstMessage: a connection that closes before it
// sends anything (the proxy's check that the runner is there) starts no
// child.
func TestRunnerNoChildBeforeFirstMessage(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242)})
	for range 3 {
		c := ts.dial(t)
		_ = c.Close(context.Background())
	}
	for deadline := time.Now().Add(10 * time.Second); ts.Running() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still served 10 s after they closed", ts.Running())
		}
	}
	if !echoes(t, ts.dial(t)) {
		t.Fatal("not served")
	}
	if n := strings.Count(ts.logs.String(), "child started"); n != 1 {
		t.Fatalf("%d children started, want 1 (for the connection that sent a message):\n%s", n, ts.logs.String())
	}
}

// TestRunnerLastWordsAfterStdinCloses: a child whose stdin is closed (it
// closed it, or exited) still gets what it writes until it ends to the
// peer: a message the peer sends then does not cut the connection.
func TestRunnerLastWordsAfterStdinCloses(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: stdio.Config{
		Path: "/bin/sh", Args: []string{"-c", `exec 0<&-; echo '"a"'; sleep 0.3; echo '"b"'`}, StopGrace: 5 * time.Second}})
	c := ts.dial(t)
	_ = c.Send([]byte(`{}`))
	if m, ok := recv(t, c); !ok || m != `"a"` {
		t.Fatalf("first message %q %v", m, ok)
	}
	_ = c.Send([]byte(`{"after":"stdin closed"}`)) // fails in the runner: the child's stdin is closed
	if m, ok := recv(t, c); !ok || m != `"b"` {
		t.Fatalf("the child's last words: %q %v, want \"b\"", m, ok)
	}
}

// TestRunnerStripsMRTR: a child of the runner never sees an MRTR_*
// variable of the runner's environment (mrtr runner refuses to start
// with one; this is the second line).
func TestRunnerStripsMRTR(t *testing.T) {
	t.Setenv("MRTR_KEYS", "v1-not-for-children")
	t.Setenv("RUNNER_TEST_VISIBLE", "yes")
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: stdio.Config{Path: "/usr/bin/env"}})
	c := ts.dial(t)
	_ = c.Send([]byte(`{}`))
	var env []string
	for {
		m, ok := recv(t, c)
		if !ok {
			break
		}
		env = append(env, m)
	}
	all := strings.Join(env, "\n")
	if strings.Contains(all, "MRTR_") || !strings.Contains(all, "RUNNER_TEST_VISIBLE=yes") {
		t.Fatalf("the child's environment:\n%s", all)
	}
}

// TestConnCloseWaitsForTheChild: Close returns once the runner's child
// has ended (as stdio's Stop returns once its child is reaped), so the
// proxy's count of children is the runner's; with ctx ended it cuts the
// connection at once.
func TestConnCloseWaitsForTheChild(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: stdio.Config{
		Path: "/bin/sh", Args: []string{"-c", `echo $$; read x; read y; sleep 0.3`}, StopGrace: 5 * time.Second}})
	c := ts.dial(t)
	_ = c.Send([]byte(`{}`))
	line, _ := recv(t, c)
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("first line %q", line)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("the child (pid %d) still runs when Close returned", pid)
	}
	if err := c.Send([]byte(`{}`)); !errors.Is(err, stdio.ErrExited) {
		t.Fatalf("Send after Close: %v", err)
	}

	// A child that ignores its stdin's end and SIGTERM: Close with an
	// ended ctx does not wait for it; the runner still stops it.
	ts2 := serve(t, Options{AllowUIDs: []uint32{uint32(os.Getuid())}, self: uid(4242), Child: pidChild()})
	c2 := ts2.dial(t)
	_ = c2.Send([]byte(`{}`))
	line, _ = recv(t, c2)
	pid, err = strconv.Atoi(line)
	if err != nil {
		t.Fatalf("first line %q", line)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c2.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended ctx: %v", err)
	}
	waitGone(t, pid, "its connection closed")
}

// TestRunnerRefusalsRateLimited: a flood of refused peers is not a flood
// of warnings; the next one logged counts those left out.
func TestRunnerRefusalsRateLimited(t *testing.T) {
	ts := serve(t, Options{AllowUIDs: []uint32{5}, self: uid(4242)})
	const n = 40
	for range n {
		c := ts.dial(t)
		if _, ok := recv(t, c); ok {
			t.Fatal("a refused peer got a message")
		}
		_ = c.Close(context.Background())
	}
	logged := strings.Count(ts.logs.String(), MsgRefusedPeer)
	if logged < 1 || logged > warnBurst+n/4 {
		t.Fatalf("%d refusals, %d warnings: want at least one, and far fewer than refusals", n, logged)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ts.logs.String(), `"suppressed":`); time.Sleep(100 * time.Millisecond) {
		c := ts.dial(t)
		recv(t, c)
		_ = c.Close(context.Background())
		if time.Now().After(deadline) {
			t.Fatalf("no warning counts the suppressed ones:\n%s", ts.logs.String())
		}
	}
}
