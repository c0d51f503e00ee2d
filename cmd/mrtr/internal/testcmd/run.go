package testcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
)

// Buffer is a goroutine-safe log sink.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Main runs a command line (the words after mrtr) and returns its exit
// status: main's run in cmd/mrtr's tests, Commands in a command's.
type Main func(ctx context.Context, a *base.App, args []string) int

// Commands is a Main that runs cmds as main runs them (base.Dispatch);
// a name none of them has exits 2.
func Commands(cmds ...*base.Command) Main {
	return func(ctx context.Context, a *base.App, args []string) int {
		if status, ok := base.Dispatch(ctx, a, cmds, args); ok {
			return status
		}
		return 2
	}
}

// Deadline bounds one in-process run of a command in the tests. Every
// command they run ends on its own in well under a second; the bound only
// turns a regression that hangs into a failure naming the command, instead
// of the whole package stopping at go test's -timeout. It decides no
// outcome of a healthy run.
const Deadline = 2 * time.Minute

// Patience bounds each wait for a command's child to start or to say
// something; a correct run takes well under it. It decides no outcome.
const Patience = 30 * time.Second

// Run runs mrtr args in-process through main with the environment getenv
// (nil: none) and empty stdin, and returns its exit status and output. A
// run still going after Deadline fails t.
func Run(t testing.TB, main Main, getenv func(string) string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr, ended, stopped := RunFor(Deadline, main, getenv, args...)
	if !ended {
		how := "it stopped when its context was cancelled"
		if !stopped {
			how = "it ignored the cancel of its context and is left running"
		}
		t.Fatalf("mrtr %s still running after %v, a hang (%s); its stderr so far:\n%s",
			strings.Join(args, " "), Deadline, how, stderr)
	}
	return code, stdout, stderr
}

// RunFor runs mrtr args in-process for at most bound. ended is false
// when the command had not ended by then: its context is then cancelled,
// and stopped says whether it returned within a few seconds more (a
// command that ignores its context is left running).
func RunFor(bound time.Duration, main Main, getenv func(string) string, args ...string) (code int, stdout, stderr string, ended, stopped bool) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var out, errb Buffer
	a := &base.App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: getenv}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- main(ctx, a, args) }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case code = <-done:
		return code, out.String(), errb.String(), true, true
	case <-timer.C:
	}
	cancel()
	select {
	case <-done:
		stopped = true
	case <-time.After(10 * time.Second):
	}
	return -1, out.String(), errb.String(), false, stopped
}

// Start runs mrtr args (serve or proxy) through main on a free loopback
// port with JSON logs, and returns its /mcp URL and log once it serves.
// At cleanup it is stopped, and an exit status other than 0 fails t.
func Start(t testing.TB, main Main, args ...string) (string, *Buffer) {
	t.Helper()
	logs := new(Buffer)
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	args = append([]string{args[0], "--addr", "127.0.0.1:0", "--log-format", "json"}, args[1:]...)
	go func() { done <- main(ctx, a, args) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("%s exited %d: %s", args[0], code, logs.String())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if u := ServingURL(logs.String()); u != "" {
			return u, logs
		}
	}
	t.Fatalf("%s did not start: %s", args[0], logs.String())
	return "", nil
}

// ServingURL is the url of the log line "mrtr serving" in JSON logs, or "".
func ServingURL(logs string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "mrtr serving" {
			return line.URL
		}
	}
	return ""
}

// LogLines are the JSON log lines of logs with message msg.
func LogLines(logs *Buffer, msg string) []map[string]any { return Lines(logs.String(), msg) }

// Lines are the JSON log lines of log with message msg.
func Lines(log, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// LogURL returns the url of the first JSON log line with message msg.
func LogURL(t testing.TB, logs *Buffer, msg string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			return line.URL
		}
	}
	t.Fatalf("no %q in the log: %s", msg, logs.String())
	return ""
}

// Records are the JSON log records of log whose msg starts with prefix.
func Records(log, prefix string) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]json.RawMessage
		var msg string
		if json.Unmarshal(sc.Bytes(), &rec) == nil && json.Unmarshal(rec["msg"], &msg) == nil && strings.HasPrefix(msg, prefix) {
			out = append(out, rec)
		}
	}
	return out
}
