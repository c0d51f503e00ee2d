package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ping sends PING to the server at a redis:// URL and reports the reply or
// the error.
func ping(rawURL string) error { return pingWithin(rawURL, 2*time.Second) }

func pingWithin(rawURL string, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// send sends one inline command and returns the first line of the reply.
func send(t *testing.T, addr, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

func TestStart(t *testing.T) {
	u := Start(t)
	if !strings.HasPrefix(u, "redis://") {
		t.Fatalf("URL = %q, want redis://...", u)
	}
	if err := ping(u); err != nil {
		t.Fatal(err)
	}
}

func TestStopStart(t *testing.T) {
	srv := StartServer(t)
	u := srv.URL()
	addr := srv.Addr()
	if got := send(t, addr, "SET k v"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}

	srv.Stop()
	if err := ping(u); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	srv.Stop() // stopping a stopped server does nothing

	srv.Start()
	if srv.URL() != u {
		t.Fatalf("URL after restart = %q, want %q", srv.URL(), u)
	}
	if err := ping(u); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if got := send(t, addr, "EXISTS k"); got != ":0" {
		t.Fatalf("EXISTS after restart = %q, want :0 (no persistence)", got)
	}
	srv.Start() // starting a running server does nothing

	srv.Close()
	srv.Close()
	if err := ping(u); err == nil {
		t.Fatal("PING succeeded after Close")
	}
}

func TestNoPersistence(t *testing.T) {
	srv := StartServer(t)
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(conn, "CONFIG GET save\r\nCONFIG GET appendonly\r\n")
	r := bufio.NewReader(conn)
	var lines []string
	for range 10 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	// *2 $4 save $0 "" *2 $10 appendonly $2 no
	if lines[4] != "" || lines[9] != "no" {
		t.Fatalf("config = %q, want save \"\" and appendonly no", lines)
	}
}

func TestPauseResume(t *testing.T) {
	srv := StartServer(t)
	srv.Pause()
	if err := pingWithin(srv.URL(), 200*time.Millisecond); err == nil {
		t.Fatal("PING answered by a paused server")
	}
	srv.Resume()
	if err := ping(srv.URL()); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestTwoServers(t *testing.T) {
	a, b := StartServer(t), StartServer(t)
	if a.URL() == b.URL() {
		t.Fatalf("two servers share %s", a.URL())
	}
	a.Stop()
	if err := ping(b.URL()); err != nil {
		t.Fatalf("stopping one server affected the other: %v", err)
	}
}

func TestStartMain(t *testing.T) {
	u, stop, err := StartMain()
	if errors.Is(err, ErrNotFound) {
		Unavailable(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(u); err != nil {
		t.Fatal(err)
	}
	stop()
	stop()
	if os.Getenv(EnvURL) == "" {
		if err := ping(u); err == nil {
			t.Fatal("PING succeeded after stop")
		}
	}
}

// A redis-server that is not on PATH skips the test, or fails it when
// EnvRequire=1.
func TestMissingServer(t *testing.T) {
	t.Setenv(EnvURL, "")
	t.Setenv("PATH", t.TempDir())

	t.Run("Skip", func(t *testing.T) {
		t.Setenv(EnvRequire, "")
		rec := runTB(t, func(tb testing.TB) { Start(tb) })
		if !rec.skipped || rec.failed || rec.msg != ErrNotFound.Error() {
			t.Fatalf("skipped=%v failed=%v msg=%q; want a skip with %q", rec.skipped, rec.failed, rec.msg, ErrNotFound)
		}
		if !strings.Contains(rec.msg, "scripts/redis.sh ensure") || !strings.Contains(rec.msg, EnvRequire+"=1") {
			t.Fatalf("skip message %q does not say how to fix it", rec.msg)
		}
		if _, _, err := StartMain(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("StartMain = %v, want ErrNotFound", err)
		}
	})
	t.Run("Require", func(t *testing.T) {
		t.Setenv(EnvRequire, "1")
		rec := runTB(t, func(tb testing.TB) { Start(tb) })
		if rec.skipped || !rec.failed || !strings.Contains(rec.msg, EnvRequire+"=1") {
			t.Fatalf("skipped=%v failed=%v msg=%q; want a failure naming %s", rec.skipped, rec.failed, rec.msg, EnvRequire)
		}
		_, stop, err := StartMain()
		stop()
		if err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("StartMain = %v, want an error other than ErrNotFound", err)
		}
		rec = runTB(t, func(tb testing.TB) { Unavailable(tb, err) })
		if !rec.failed {
			t.Fatal("Unavailable did not fail the test")
		}
	})
}

func TestExternalURL(t *testing.T) {
	t.Setenv(EnvURL, "redis://example.invalid:6379/3")
	if got := Start(t); got != "redis://example.invalid:6379/3" {
		t.Fatalf("Start = %q", got)
	}
	u, stop, err := StartMain()
	stop()
	if err != nil || u != "redis://example.invalid:6379/3" {
		t.Fatalf("StartMain = %q, %v", u, err)
	}
	// A server that tests stop and freeze is never the shared one: setting
	// the URL must not turn the outage tests off.
	srv := StartServer(t)
	if srv.URL() == os.Getenv(EnvURL) || ping(srv.URL()) != nil {
		t.Fatalf("StartServer with %s set = %q, want a server of its own", EnvURL, srv.URL())
	}
	srv.Stop()
	if err := ping(srv.URL()); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	srv.Start()
	srv.Pause()
	srv.Resume()
	if err := ping(srv.URL()); err != nil {
		t.Fatalf("PING after Start, Pause and Resume: %v", err)
	}
}

// Unsupported skips, or fails when EnvRequire=1.
func TestUnsupported(t *testing.T) {
	t.Setenv(EnvRequire, "")
	rec := runTB(t, func(tb testing.TB) { Unsupported(tb, "no %s", "ACL") })
	if !rec.skipped || rec.failed || rec.msg != "testredis: no ACL" {
		t.Fatalf("skipped=%v failed=%v msg=%q; want a skip", rec.skipped, rec.failed, rec.msg)
	}
	t.Setenv(EnvRequire, "1")
	rec = runTB(t, func(tb testing.TB) { Unsupported(tb, "no %s", "ACL") })
	if rec.skipped || !rec.failed || !strings.Contains(rec.msg, "no ACL") || !strings.Contains(rec.msg, EnvRequire+"=1") {
		t.Fatalf("skipped=%v failed=%v msg=%q; want a failure naming %s", rec.skipped, rec.failed, rec.msg, EnvRequire)
	}
}

// recorder is a testing.TB that records how a helper ended the test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) { r.skipped, r.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.failed, r.msg = true, fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

// runTB runs f in its own goroutine, as the testing package runs a test, with
// a recorder in place of t.
func runTB(t *testing.T, f func(testing.TB)) *recorder {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	return rec
}
