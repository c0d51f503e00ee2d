//go:build unix

package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// patience bounds every wait of these tests: exceeding it fails the test,
// naming what did not happen, well before a test binary's timeout. It
// decides no outcome: a correct run ends each wait in well under a second,
// even under -race on a loaded machine.
const patience = 15 * time.Second

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs the test binary as a child in the given helper mode, and stops
// it (and checks it was reaped) when the test ends.
func start(t *testing.T, mode string, cfg Config) *Child {
	t.Helper()
	cfg.Path = self(t)
	// GORACE: a -race child would sleep a second on exit.
	cfg.Env = append(cfg.Env, helperVar+"="+mode, "GORACE=atexit_sleep_ms=0")
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := stopWithin(t, c, context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		assertReaped(t, c.Pid())
	})
	return c
}

// stopWithin stops c, failing t if Stop has not returned within patience:
// the child was not reaped (its group not signalled, or no SIGKILL). It
// then kills the child by its pid, still its own, so the test leaves
// nothing running.
func stopWithin(t *testing.T, c *Child, ctx context.Context) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- c.Stop(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(patience):
		syscall.Kill(-c.Pid(), syscall.SIGKILL)
		syscall.Kill(c.Pid(), syscall.SIGKILL)
		t.Fatalf("Stop did not return within %v: child %d was not made to exit and reaped", patience, c.Pid())
		return nil
	}
}

func recv(t *testing.T, c *Child) []byte {
	t.Helper()
	select {
	case msg, ok := <-c.Recv():
		if !ok {
			t.Fatalf("Recv closed; child ended: %v", waitDone(t, c))
		}
		return msg
	case <-time.After(patience):
		t.Fatal("no message from the child")
		return nil
	}
}

// waitDone waits for the child's end and returns Err.
func waitDone(t *testing.T, c *Child) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(patience):
		t.Fatal("child did not end")
		return nil
	}
}

// drain receives until Recv is closed and returns what came.
func drain(t *testing.T, c *Child) [][]byte {
	t.Helper()
	var got [][]byte
	deadline := time.After(patience)
	for {
		select {
		case msg, ok := <-c.Recv():
			if !ok {
				return got
			}
			got = append(got, msg)
		case <-deadline:
			t.Fatal("Recv not closed")
		}
	}
}

func TestEchoInOrder(t *testing.T) {
	c := start(t, "echo", Config{})
	const n = 2000
	go func() {
		for i := range n {
			if err := c.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)); err != nil {
				t.Errorf("Send %d: %v", i, err)
				return
			}
		}
	}()
	for i := range n {
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		if got := string(recv(t, c)); got != want {
			t.Fatalf("message %d = %s, want %s", i, got, want)
		}
	}
	if err := stopWithin(t, c, context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err after stdin EOF and exit 0 = %v, want nil", err)
	}
	if got := drain(t, c); len(got) != 0 {
		t.Errorf("%d more messages after the echoes", len(got))
	}
}

// Messages larger than a pipe's buffer, from many goroutines: each line
// that comes back must be one whole message, each sender's in its order.
func TestConcurrentSendsDoNotInterleave(t *testing.T) {
	c := start(t, "echo", Config{})
	const senders, each = 8, 100
	type msg struct {
		G, I int
		Pad  string
	}
	var wg sync.WaitGroup
	defer func() {
		stopWithin(t, c, context.Background()) // unblocks the senders if the test fails
		wg.Wait()
	}()
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				pad := 10
				if i%10 == 0 {
					pad = 100 << 10
				}
				b, _ := json.Marshal(msg{G: g, I: i, Pad: strings.Repeat("p", pad)})
				if err := c.Send(b); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		})
	}
	next := make([]int, senders)
	for range senders * each {
		line := recv(t, c)
		var m msg
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("an echoed line is not one message (%d bytes): %v", len(line), err)
		}
		if m.I != next[m.G] {
			t.Fatalf("sender %d: got message %d, want %d", m.G, m.I, next[m.G])
		}
		next[m.G]++
	}
}

func TestSendFraming(t *testing.T) {
	c := start(t, "echo", Config{})
	if err := c.Send([]byte("{\n  \"id\": 1,\r\n  \"s\": \"a\\nb\"\n}")); err != nil {
		t.Fatalf("Send of pretty JSON: %v", err)
	}
	if got, want := string(recv(t, c)), `{"id":1,"s":"a\nb"}`; got != want {
		t.Errorf("pretty JSON arrived as %s, want %s", got, want)
	}
	for _, bad := range []string{"not json\n{}", "{\"a\":\n", "", " \t"} {
		if err := c.Send([]byte(bad)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Send(%q) = %v, want ErrInvalidMessage", bad, err)
		}
	}
	// The refused ones wrote nothing: the next message is the next line.
	if err := c.Send([]byte(`{"id":2}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(recv(t, c)); got != `{"id":2}` {
		t.Errorf("after refused messages got %s", got)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("MRTR_KEYS", "k1:c2VjcmV0")
	t.Setenv("MRTR_BEARER", "tok")
	t.Setenv("STDIO_TEST_KEEP", "kept")
	t.Setenv("STDIO_TEST_OVERRIDE", "parent")
	c := start(t, "env", Config{Env: []string{
		"STDIO_TEST_EXTRA=a=b",
		"STDIO_TEST_OVERRIDE=extra",
		"MRTR_UPSTREAM_SETTING=explicit",
	}})
	var m struct{ Env []string }
	if err := json.Unmarshal(recv(t, c), &m); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range m.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s twice in the child's environment", k)
		}
		env[k] = v
	}
	for k := range env {
		if strings.HasPrefix(k, "MRTR_") && k != "MRTR_UPSTREAM_SETTING" {
			t.Errorf("%s reached the child", k)
		}
	}
	for k, want := range map[string]string{
		"STDIO_TEST_KEEP":       "kept",
		"STDIO_TEST_EXTRA":      "a=b",
		"STDIO_TEST_OVERRIDE":   "extra",
		"MRTR_UPSTREAM_SETTING": "explicit",
		"PATH":                  os.Getenv("PATH"),
	} {
		if got, ok := env[k]; !ok || got != want {
			t.Errorf("child's %s = %q (set %v), want %q", k, got, ok, want)
		}
	}
}

func TestStartErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Path: "/nonexistent/mrtr-no-such-server", Env: []string{"TOKEN=sekrit-value"}},
		{Path: "mrtr-no-such-server-in-path", Args: []string{"--token", "sekrit-value"}},
		{Path: self(t), Env: []string{"sekrit-value"}},
		{Path: self(t), Env: []string{"MRTR_KEYS=sekrit-value"}},
		{Path: self(t), Dir: "/nonexistent/dir", Env: []string{"TOKEN=sekrit-value"}},
	} {
		c, err := Start(cfg)
		if err == nil {
			stopWithin(t, c, context.Background())
			t.Errorf("Start(%+v) succeeded", cfg)
			continue
		}
		if !strings.Contains(err.Error(), cfg.Path) {
			t.Errorf("error %q does not name the command %s", err, cfg.Path)
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("error %q shows an argument or the environment", err)
		}
	}
}

// syncBuffer is an io.Writer for a slog handler written from the stderr
// reader and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// waitFor waits until a record with the message msg has been logged.
func (s *syncBuffer) waitFor(t *testing.T, msg string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		for _, r := range s.records(t) {
			if lineMsg(r) == msg {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never logged", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStderrLogged(t *testing.T) {
	var buf syncBuffer
	// A burst large enough for every line: the limit is TestStderrFlood's.
	c := start(t, "stderr", Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), StderrBurst: 1 << 20})
	if err := waitDone(t, c); err != nil {
		t.Fatalf("Err = %v", err)
	}
	// Done means every stderr line has been logged.
	recs := buf.records(t)
	long := strings.Repeat("é", 3000)
	want := []struct {
		msg   string
		bytes float64 // line_bytes when cut
	}{
		{"first line", 0},
		{validPrefix(long[:StderrLineBytes]) + TruncatedMarker, 6000},
		{strings.Repeat("a", StderrLineBytes), 0},
		{strings.Repeat("b", StderrLineBytes), 0},
		{strings.Repeat("c", StderrLineBytes) + TruncatedMarker, StderrLineBytes + 1},
		{strings.Repeat("d", StderrLineBytes) + TruncatedMarker, StderrLineBytes + 1},
		{strings.Repeat("e", StderrLineBytes-1), 0},
	}
	for i := range manyLines {
		want = append(want, struct {
			msg   string
			bytes float64
		}{fmt.Sprintf("line %d", i), 0})
	}
	want = append(want, struct {
		msg   string
		bytes float64
	}{"last words", 0})
	if len(recs) != len(want) {
		t.Fatalf("%d log records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if r["level"] != "INFO" || r["stream"] != "stderr" || r["pid"] != float64(c.Pid()) {
			t.Errorf("record %d = %v, want level INFO, stream stderr, pid %d", i, r, c.Pid())
		}
		if r["msg"] != ChildRecordMsg {
			t.Errorf("record %d msg = %q, want %q with the line as child.msg", i, r["msg"], ChildRecordMsg)
		}
		msg := lineMsg(r)
		if msg != want[i].msg {
			t.Errorf("record %d msg = %.40q… (%d bytes), want %.40q… (%d bytes)", i, msg, len(msg), want[i].msg, len(want[i].msg))
		}
		if !utf8.ValidString(msg) {
			t.Errorf("record %d is not valid UTF-8", i)
		}
		if got, _ := r["line_bytes"].(float64); got != want[i].bytes {
			t.Errorf("record %d line_bytes = %v, want %v", i, got, want[i].bytes)
		}
	}
	if got := len(lineMsg(recs[1])); got > StderrLineBytes+len(TruncatedMarker) {
		t.Errorf("cut line is %d bytes", got)
	}
}

func TestChildExitsByItself(t *testing.T) {
	c := start(t, "exit", Config{})
	if err := c.Send([]byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	err := waitDone(t, c)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Err = %v, want exit status 3", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(c.Pid())) {
		t.Errorf("Err %q does not name the pid", err)
	}
	if err := c.Send([]byte(`{"id":2}`)); !errors.Is(err, ErrExited) {
		t.Errorf("Send after exit = %v, want ErrExited", err)
	}
	if got := drain(t, c); len(got) != 0 {
		t.Errorf("got %d messages", len(got))
	}
	assertReaped(t, c.Pid())
	if err := stopWithin(t, c, context.Background()); err != nil {
		t.Errorf("Stop after exit = %v", err)
	}
	if c.Err() != err {
		t.Errorf("Err changed after Stop: %v", c.Err())
	}
}

func TestLineLimit(t *testing.T) {
	const limit = 100000
	c := start(t, "big", Config{
		MaxMessageBytes: limit,
		Env:             []string{fmt.Sprintf("%s=%d,%d", sizesVar, limit, limit+1)},
	})
	got := drain(t, c)
	if len(got) != 1 || len(got[0]) != limit {
		t.Fatalf("got %d messages, want one of %d bytes", len(got), limit)
	}
	err := waitDone(t, c)
	if !errors.Is(err, ErrMessageTooLong) {
		t.Fatalf("Err = %v, want ErrMessageTooLong", err)
	}
	if err := c.Send([]byte(`{}`)); !errors.Is(err, ErrExited) {
		t.Errorf("Send after a protocol error = %v, want ErrExited", err)
	}
}

// A 32 MiB line against a 1 MiB limit: the child is stopped and the proxy
// never holds the line.
func TestOverlongLineBoundedMemory(t *testing.T) {
	const limit, size = 1 << 20, 32 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := start(t, "big", Config{
		MaxMessageBytes: limit,
		Env:             []string{fmt.Sprintf("%s=%d", sizesVar, size)},
	})
	if got := drain(t, c); len(got) != 0 {
		t.Errorf("got %d messages after the over-long line", len(got))
	}
	if err := waitDone(t, c); !errors.Is(err, ErrMessageTooLong) {
		t.Fatalf("Err = %v, want ErrMessageTooLong", err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("allocated %d bytes for a %d-byte line with a %d-byte limit", alloc, size, limit)
	}
}

func TestStopIdempotent(t *testing.T) {
	c := start(t, "echo", Config{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := stopWithin(t, c, context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
			select {
			case <-c.Done():
			default:
				t.Error("Stop returned before Done")
			}
		})
	}
	wg.Wait()
	if err := c.Err(); err != nil {
		t.Errorf("echo child stopped by stdin EOF: Err = %v", err)
	}
	if err := c.Send([]byte(`{}`)); !errors.Is(err, ErrExited) {
		t.Errorf("Send after Stop = %v, want ErrExited", err)
	}
}

// A stubborn child (SIGTERM and stdin EOF ignored) with a grandchild that
// ignores SIGTERM too: Stop escalates to SIGKILL of the whole group. The
// test ends each grace period itself, once the child has said on stderr
// that it saw the previous step.
func TestStopKillsStubbornGroup(t *testing.T) {
	var buf syncBuffer
	graceOver := make(chan time.Time)
	c := start(t, "stubborn", Config{
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		after:  func(time.Duration) <-chan time.Time { return graceOver },
	})
	var m struct{ Grandchild int }
	if err := json.Unmarshal(recv(t, c), &m); err != nil || m.Grandchild == 0 {
		t.Fatalf("no grandchild pid: %v", err)
	}
	t.Cleanup(func() { killHelper(m.Grandchild) }) // when the test failed
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	buf.waitFor(t, "stdin EOF")
	endGrace(t, graceOver, "the wait after closing stdin")
	buf.waitFor(t, "got SIGTERM")
	endGrace(t, graceOver, "the wait after SIGTERM")
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		syscall.Kill(-c.Pid(), syscall.SIGKILL)
		syscall.Kill(c.Pid(), syscall.SIGKILL)
		t.Fatalf("Stop did not return within %v after both grace periods: no SIGKILL reached the group of child %d", patience, c.Pid())
	}
	var exit *exec.ExitError
	if err := c.Err(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Err = %v, want killed by SIGKILL", err)
	}
	var saw []string
	for _, r := range buf.records(t) {
		saw = append(saw, lineMsg(r))
	}
	if strings.Join(saw, ",") != "stdin EOF,got SIGTERM" {
		t.Errorf("the child saw %q, want stdin EOF then SIGTERM", saw)
	}
	assertReaped(t, c.Pid())
	waitGone(t, m.Grandchild)
}

// killHelper sends SIGKILL to pid if it is still a helper of these tests
// (its environment says so): a grandchild a failed test left running.
func killHelper(pid int) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err == nil && bytes.Contains(env, []byte(helperVar+"=")) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// endGrace ends a grace period of Stop (the after seam), failing t if Stop
// is not waiting for one within patience.
func endGrace(t *testing.T, graceOver chan<- time.Time, what string) {
	t.Helper()
	select {
	case graceOver <- time.Now():
	case <-time.After(patience):
		t.Fatalf("Stop never began %s", what)
	}
}

// A Stop whose context has ended skips the grace periods.
func TestStopContextSkipsGrace(t *testing.T) {
	c := start(t, "stubborn", Config{StopGrace: time.Hour})
	recv(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := stopWithin(t, c, ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want context.Canceled", err)
	}
	var exit *exec.ExitError
	if err := c.Err(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Err = %v, want killed by SIGKILL", err)
	}
}

// An idle child costs the proxy little heap: its readers hold no read
// buffer while they wait (two 4 KiB buffers of its own did, most of an
// idle child's heap). The bound leaves room for what a child must keep:
// the Child, its pipes, channels, process and logger.
func TestIdleChildHeap(t *testing.T) {
	const n = 16
	log := slog.New(slog.DiscardHandler) // stderr read too
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	kids := make([]*Child, 0, n)
	warm := start(t, "echo", Config{Logger: log})
	kids = append(kids, warm)
	before := heap()
	for range n {
		kids = append(kids, start(t, "echo", Config{Logger: log}))
	}
	for i, c := range kids { // every reader has read something
		msg := fmt.Sprintf(`{"n":%d}`, i)
		if err := c.Send([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := string(recv(t, c)); got != msg {
			t.Fatalf("got %s, want %s", got, msg)
		}
	}
	per := (int64(heap()) - int64(before)) / n
	t.Logf("%d B of heap per idle child", per)
	if per > 8<<10 {
		t.Fatalf("an idle child holds %d B of heap, want at most %d", per, 8<<10)
	}
	runtime.KeepAlive(kids)
}

// A child that closes its stdout and lives on (ignoring stdin EOF and
// SIGTERM) is stopped without a Stop: it can answer nothing more, and
// left alone it held its process slot forever (issue 27, item 4).
func TestClosedStdoutStopsChild(t *testing.T) {
	c := start(t, "closeout", Config{StopGrace: 50 * time.Millisecond})
	if got := string(recv(t, c)); got != `"closing"` {
		t.Fatalf("got %s", got)
	}
	if got := drain(t, c); len(got) != 0 {
		t.Fatalf("%d messages after stdout was closed", len(got))
	}
	select {
	case <-c.Done():
	case <-time.After(patience):
		signalGroup(c.Pid(), true)
		t.Fatalf("child %d closed its stdout %v ago and still runs: it was never stopped", c.Pid(), patience)
	}
	var exit *exec.ExitError
	if err := c.Err(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Err = %v, want killed by SIGKILL (it ignores SIGTERM)", err)
	}
	assertReaped(t, c.Pid())
}

// TestStderrFlood pins issue 27 item 9: a child flooding stderr (`yes >&2`
// wrote 490 MB of log in 5 s) gets DefaultStderrBurst lines logged at
// once and DefaultStderrRate a second after that; every line is still
// read, and each one dropped is counted in a record that says so.
func TestStderrFlood(t *testing.T) {
	var buf syncBuffer
	began := time.Now()
	c := start(t, "flood", Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err := waitDone(t, c); err != nil {
		t.Fatalf("Err = %v", err)
	}
	elapsed := time.Since(began)
	lines, dropped, drops := 0, 0, 0
	for _, r := range buf.records(t) {
		switch lineMsg(r) {
		case "y":
			lines++
		case StderrDroppedMsg:
			if r["level"] != "WARN" {
				t.Errorf("the dropped-lines record is at %v, want WARN", r["level"])
			}
			drops++
			n, _ := r["dropped_lines"].(float64)
			dropped += int(n)
		default:
			t.Errorf("unexpected record %v", r)
		}
	}
	t.Logf("%d lines in %v: %d logged, %d dropped in %d records", floodLines, elapsed, lines, dropped, drops)
	if lines+dropped != floodLines {
		t.Errorf("%d lines logged and %d counted as dropped, want %d in all", lines, dropped, floodLines)
	}
	// However long the flood took, the bucket cannot have let through more.
	if most := DefaultStderrBurst + int(elapsed.Seconds()*DefaultStderrRate) + 1; lines > most {
		t.Errorf("%d lines logged in %v, want at most %d", lines, elapsed, most)
	}
	if drops == 0 || drops > lines+1 {
		t.Errorf("%d dropped-lines records for %d lines logged, want between 1 and %d", drops, lines, lines+1)
	}
}

// TestStderrDroppedThenFlowing: with the clock held, 150 lines at once
// log the first DefaultStderrBurst; once the clock has moved a second on,
// the next line is logged after one record counting the 50 dropped.
func TestStderrDroppedThenFlowing(t *testing.T) {
	var buf syncBuffer
	var clock atomic.Int64
	base := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return base.Add(time.Duration(clock.Load())) }
	c := start(t, "burst-pause-line", Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), now: now})
	if got := string(recv(t, c)); got != `"burst done"` {
		t.Fatalf("got %s", got)
	}
	buf.waitFor(t, fmt.Sprintf("burst %d", DefaultStderrBurst-1))
	clock.Add(int64(time.Second))
	if err := c.Send([]byte(`{"go":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, c); err != nil {
		t.Fatalf("Err = %v", err)
	}
	var got []string
	for _, r := range buf.records(t) {
		msg := lineMsg(r)
		if n, ok := r["dropped_lines"].(float64); ok {
			msg = fmt.Sprintf("%s: %v", msg, n)
		}
		got = append(got, msg)
	}
	var want []string
	for i := range DefaultStderrBurst {
		want = append(want, fmt.Sprintf("burst %d", i))
	}
	want = append(want, fmt.Sprintf("%s: %d", StderrDroppedMsg, 150-DefaultStderrBurst), "after the pause")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged %d records, ending %q; want %d, ending %q", len(got), got[max(0, len(got)-3):], len(want), want[len(want)-3:])
	}
}

// lineMsg is the text a record logs: a child's line (child.msg, under
// ChildRecordMsg), or the proxy's own message.
func lineMsg(r map[string]any) string {
	if child, ok := r["child"].(map[string]any); ok && r["msg"] == ChildRecordMsg {
		msg, _ := child["msg"].(string)
		return msg
	}
	msg, _ := r["msg"].(string)
	return msg
}
