// Package testredis starts throw-away redis-server processes for tests.
//
// Each server listens on a free 127.0.0.1 port, keeps nothing on disk
// (--save "" --appendonly no), runs in a temporary directory, and is stopped
// by process id (signal, then wait) when the test ends:
//
//	func TestSomething(t *testing.T) {
//		url := testredis.Start(t) // redis://127.0.0.1:PORT/0
//		...
//	}
//
// A test that takes Redis down and brings it back uses a [Server]:
//
//	srv := testredis.StartServer(t)
//	srv.Stop()  // connections are refused from now on
//	srv.Start() // the same port again, with an empty dataset
//
// A test binary that shares one server among all its tests starts it in
// TestMain with [StartMain].
//
// Topologies (topology.go) start several processes and wait for explicit
// signs of readiness (INFO replication, SENTINEL CKQUORUM and friends,
// CLUSTER INFO), never for a fixed time:
//
//	rs := testredis.StartReplicated(t, 2)    // a primary and two replicas in sync
//	ss := testredis.StartSentinel(t, 2, 3)   // the same watched by three sentinels; ss.URL()
//	cl := testredis.StartCluster(t, 3, 1)    // three primaries with a replica each; cl.URL()
//	ss.Primary.Kill()                        // SIGKILL, as a crash
//	ss.WaitFailover(t, oldAddr, 1)           // a majority of sentinels names a new primary
//
// [StartSentinelLagged] puts the replicas behind a [LagLink], a replication
// link that delivers late and loses what is in flight when the primary dies.
//
// # Environment
//
// If redis-server is not on PATH, tests that need it are skipped, unless
// MRTR_REQUIRE_REDIS=1 (CI and make test set it), which makes them fail
// instead. The same holds for a test that finds its server lacking something
// it needs ([Unsupported]): with MRTR_REQUIRE_REDIS=1 nothing skips.
//
// If MRTR_TEST_REDIS_URL is set, [Start] and [StartMain] start no process and
// return that URL. [StartServer] still starts a process of its own: its tests
// stop, restart and freeze their server, which they must never do to a
// shared one, and setting the URL must not quietly turn those tests off.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables that configure the helpers.
const (
	// EnvURL names an external server to use instead of starting one.
	EnvURL = "MRTR_TEST_REDIS_URL"

	// EnvRequire, set to 1, turns a missing redis-server into a test failure.
	EnvRequire = "MRTR_REQUIRE_REDIS"
)

// ErrNotFound reports that redis-server is not on PATH and EnvRequire is not
// set, so tests that need Redis should be skipped. [StartMain] returns it.
var ErrNotFound = errors.New("redis-server not found; install it (scripts/redis.sh ensure) or set " + EnvRequire + "=1 to make this a failure")

const (
	startTimeout = 10 * time.Second // from exec to PONG
	stopTimeout  = 10 * time.Second // from SIGTERM to exit, before SIGKILL
	startTries   = 5                // ports tried when one is taken under us
)

// Start starts a server for the duration of t and returns its URL,
// redis://127.0.0.1:PORT/0, or returns EnvURL when that is set. It skips or
// fails t if redis-server is missing (see the package documentation) and
// fails t if the server does not start.
func Start(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return StartServer(t).URL()
}

// Server is one redis-server process that a test can stop and start again on
// the same port. It is stopped when the test that created it ends.
//
// The methods that start or stop the process (Start, Stop, Pause, Resume)
// report failures through the test, so they must be called from the test's
// goroutine. URL may be called from any goroutine.
type Server struct {
	t   testing.TB
	url string

	bin  string // path of redis-server
	dir  string // working directory, holds redis.log
	port int

	// extra returns arguments that follow the defaults (and so override
	// them) at every start; nil for a plain server. conf, if set, is the
	// configuration file given first (redis-sentinel needs one).
	extra func() []string
	conf  string
	// sentinel drops the data options a sentinel does not take.
	sentinel bool

	mu   sync.Mutex
	proc *process // nil while stopped
}

// StartServer starts a server process for the duration of t, even when
// EnvURL is set (see the package documentation). It skips or fails t if
// redis-server is missing and fails t if the server does not start.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := lookPath()
	if err != nil {
		unavailable(t, err)
		return nil
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	if err := s.startFresh(); err != nil {
		t.Fatalf("testredis: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartMain starts a server for a whole test binary, to be called from
// TestMain. The caller must call stop before exiting; stop is never nil and
// may be called more than once.
//
// If EnvURL is set, StartMain returns it and starts nothing. If redis-server
// is missing, it returns an error wrapping [ErrNotFound], on which the tests
// that need Redis should call [Unavailable]; with EnvRequire=1 it returns a
// different error, on which TestMain should fail.
func StartMain() (url string, stop func(), err error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, func() {}, nil
	}
	bin, err := lookPath()
	if err != nil {
		return "", func() {}, err
	}
	dir, err := os.MkdirTemp("", "testredis-")
	if err != nil {
		return "", func() {}, fmt.Errorf("testredis: %w", err)
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.startFresh(); err != nil {
		_ = os.RemoveAll(dir)
		return "", func() {}, fmt.Errorf("testredis: %w", err)
	}
	var once sync.Once
	return s.url, func() {
		once.Do(func() {
			if err := s.stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testredis: %v\n", err)
			}
			_ = os.RemoveAll(dir)
		})
	}, nil
}

// Unavailable ends t because Redis is missing: it skips t if err wraps
// [ErrNotFound] and fails it otherwise. It is meant for the error that
// [StartMain] returned.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	unavailable(t, err)
}

// Unsupported ends t because the Redis at hand lacks something the test
// needs (a command, a signal): it skips t, or fails it when EnvRequire=1, so
// that a required run never passes by skipping.
func Unsupported(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("testredis: "+format+" (%s=1 forbids skipping)", append(args, EnvRequire)...)
		return
	}
	t.Skipf("testredis: "+format, args...)
}

// URL returns redis://127.0.0.1:PORT/0. It stays the same across Stop and
// Start.
func (s *Server) URL() string { return s.url }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop stops the server and waits for its process to exit. From then on,
// connections to its port are refused. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Fatalf("testredis: %v", err)
	}
}

// Start starts a stopped server again on the same port, with an empty
// dataset, and waits until it answers PING. Starting a running server does
// nothing.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return
	}
	var err error
	// The port was ours a moment ago; if something else holds it briefly,
	// give it a few tries before giving up.
	for range startTries {
		var inUse bool
		if inUse, err = s.startLocked(); err == nil || !inUse {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("testredis: restart on port %d: %v", s.port, err)
	}
}

// Close stops the server if it runs. It is registered as a cleanup of the
// test that created the server, may be called more than once, and reports a
// failure to stop through that test.
func (s *Server) Close() {
	if err := s.stop(); err != nil {
		s.t.Errorf("testredis: %v", err)
	}
}

// Pause freezes the server (SIGSTOP) without closing its connections: it
// accepts connections and requests but answers nothing until Resume, like a
// server behind a network partition. On platforms without SIGSTOP, Pause
// ends the test through [Unsupported].
func (s *Server) Pause() {
	s.t.Helper()
	s.signal("Pause", sigStop)
}

// Resume lets a paused server run again; it then answers the requests that
// queued up while it was paused.
func (s *Server) Resume() {
	s.t.Helper()
	s.signal("Resume", sigCont)
}

func (s *Server) signal(method string, sig os.Signal) {
	s.t.Helper()
	if sig == nil {
		Unsupported(s.t, "%s is not supported on this platform", method)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("testredis: %s: the server is stopped", method)
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("testredis: %s: %v", method, err)
	}
}

// startFresh starts the first process, on a new free port each try.
func (s *Server) startFresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range startTries {
		if s.port, err = freePort(); err != nil {
			return err
		}
		s.url = "redis://" + s.Addr() + "/0"
		var inUse bool
		if inUse, err = s.startLocked(); err == nil || !inUse {
			return err
		}
	}
	return err
}

// startLocked starts a process on s.port and waits until it answers. It
// reports whether it failed because the port was taken.
func (s *Server) startLocked() (portInUse bool, err error) {
	logPath := filepath.Join(s.dir, "redis.log")
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(s.port),
		"--protected-mode", "yes",
	)
	if !s.sentinel {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args,
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", logPath,
	)
	if s.extra != nil {
		args = append(args, s.extra()...)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	setProcAttr(cmd)
	// redis-server writes to stdout/stderr only when it cannot open the log
	// file or rejects its arguments; keep that for the error message.
	out := new(lockedWriter)
	cmd.Stdout, cmd.Stderr = out, out
	_ = os.Remove(logPath)
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	if err := waitReady(s.Addr(), cmd.Process.Pid, p.exited); err != nil {
		_ = p.stop(stopTimeout)
		logText := readTail(logPath, 2048) + out.String()
		inUse := strings.Contains(logText, "Address already in use")
		return inUse, fmt.Errorf("redis-server on port %d: %w\n%s", s.port, err, logText)
	}
	s.proc = p
	return false, nil
}

func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	p := s.proc
	s.proc = nil
	return p.stop(stopTimeout)
}

// process is one running redis-server.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when Wait has returned
	err    error         // Wait's result, set before exited is closed
}

// stop sends SIGTERM (SIGKILL where there is none), waits up to timeout for
// the process to exit, then kills it and waits again.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = terminate(p.cmd.Process)
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("redis-server (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// waitReady waits until the server on addr answers PING and reports pid as
// its process id, so that a server someone else started on the same port is
// not mistaken for ours.
func waitReady(addr string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during startup")
		default:
		}
		got, err := serverPID(addr)
		if err == nil && got == pid {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("port answered by process %d, not %d", got, pid)
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %v", startTimeout, last)
}

// serverPID sends PING and INFO server and returns process_id.
func serverPID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "+PONG\r\n" {
		return 0, fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lookPath finds redis-server. If it is missing, the error wraps ErrNotFound
// unless EnvRequire is set.
func lookPath() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin, nil
	}
	if os.Getenv(EnvRequire) == "1" {
		return "", fmt.Errorf("testredis: redis-server not found on PATH and %s=1: install it (scripts/redis.sh ensure) or point %s at a server", EnvRequire, EnvURL)
	}
	return "", fmt.Errorf("testredis: %w", ErrNotFound)
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotFound) {
		t.Skip(ErrNotFound.Error())
		return
	}
	t.Fatal(err)
}

func readTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, 0)
	}
	var b strings.Builder
	_, _ = bufio.NewReader(f).WriteTo(&b)
	return b.String()
}

// lockedWriter collects a process's output, which exec copies from another
// goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
