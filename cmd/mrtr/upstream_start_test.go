//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// runProxyUntil runs `mrtr proxy args` in-process until it returns, or
// until until (given the log so far) says to stop it; it returns the exit
// code and the whole of stderr.
func runProxyUntil(t *testing.T, a *base.App, until func(log string) bool, args ...string) (int, string) {
	t.Helper()
	logs := new(testcmd.Buffer)
	a.Stdin, a.Stdout, a.Stderr = strings.NewReader(""), io.Discard, logs
	if a.Getenv == nil {
		a.Getenv = func(string) string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, a, append([]string{"proxy", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...))
	}()
	deadline := time.After(testcmd.Patience)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case code := <-done:
			return code, logs.String()
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("the proxy neither stopped nor logged what was awaited: %s", logs.String())
		case <-poll.C:
			if until != nil && until(logs.String()) {
				cancel()
				return <-done, logs.String()
			}
		}
	}
}

// A command that exits before answering the era probe stops the proxy at
// start, with a non-zero exit status and an error naming the command's
// exit status and the end of its stderr, a value of the proxy's MRTR_*
// variables redacted (issue 28, item 1). It used to be taken as a
// 2025-11-25 upstream and served, every call failing.
func TestProxyCommandExitsAtStart(t *testing.T) {
	const secret = "s3cr3t-not-for-logs"
	t.Setenv("MRTR_TEST_SECRET", secret)
	script := `echo "starting" >&2; echo "token $MRTR_TEST_SECRET" >&2; echo "boom: missing config" >&2; exit 3`
	code, out := runProxyUntil(t, &base.App{}, func(log string) bool { return strings.Contains(log, `"msg":"mrtr serving"`) },
		"--upstream-env", "MRTR_TEST_SECRET="+secret, "--", "sh", "-c", script)
	if code == 0 {
		t.Fatalf("the proxy exited 0 (or served): %s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var errLine string
	for i, l := range lines {
		if strings.HasPrefix(l, "mrtr proxy: ") {
			errLine = strings.Join(lines[i:], "\n")
			break
		}
	}
	for _, want := range []string{"sh", "exit status 3", "boom: missing config", "starting", "token [redacted]"} {
		if !strings.Contains(errLine, want) {
			t.Errorf("the error lacks %q: %q", want, errLine)
		}
	}
	if strings.Contains(errLine, secret) {
		t.Errorf("the error carries an MRTR_* value: %q", errLine)
	}
	if strings.Contains(out, "mrtr serving") {
		t.Errorf("the proxy served: %s", out)
	}
}

// A child ended by a signal is named by it.
func TestProxyCommandKilledAtStart(t *testing.T) {
	code, out := runProxyUntil(t, &base.App{}, func(log string) bool { return strings.Contains(log, `"msg":"mrtr serving"`) },
		"--", "sh", "-c", `kill -9 $$`)
	if code == 0 || !strings.Contains(out, "signal: killed") || !strings.Contains(out, "it wrote nothing on stderr") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// waitingMsg is the probe's log line while it waits.
const waitingMsg = "mrtr proxy: waiting for the upstream command to answer server/discover"

// While the probe waits for a command that does not answer, the log names
// it and the time left (issue 28, item 1); it used to say nothing for the
// whole 90 s. With the probe timeout shortened the proxy then takes the
// command as 2025-11-25 and serves, as before.
func TestProxyCommandWaitLogged(t *testing.T) {
	a := &base.App{ProbeTimeout: 2 * time.Second}
	code, out := runProxyUntil(t, a, func(log string) bool { return strings.Contains(log, `"msg":"mrtr serving"`) },
		"--", "sleep", "600")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	recs := testcmd.Lines(out, waitingMsg)
	if len(recs) == 0 {
		t.Fatalf("no waiting record: %s", out)
	}
	if recs[0]["command"] != "sleep" || recs[0]["left"] == nil || recs[0]["waited"] == nil {
		t.Fatalf("waiting record %v", recs[0])
	}
	if !strings.Contains(out, "no answer to server/discover") {
		t.Fatalf("no timeout record: %s", out)
	}
}

// With --upstream-era given (no probe), a child that exits before
// answering initialize is logged with its exit status and the end of its
// stderr (issue 28, item 1): the log said only that the upstream could not
// be initialized.
func TestProxyCommandGivenEraLogsExit(t *testing.T) {
	url, logs := startProxyCmd(t, "--upstream-era", "legacy", "--", "sh", "-c", `echo "boom: missing config" >&2; exit 3`)
	if _, e := testcmd.RPCPost(t, url, "tools/list", map[string]any{}); e == nil || !strings.Contains(string(e["message"]), "could not be") {
		t.Fatalf("a call to an upstream that cannot start: %v", e)
	}
	if rec := exitRecord(logs.String(), "bridge: initialize the upstream"); !strings.Contains(rec.Exit, "exit status 3") || !strings.Contains(rec.StderrTail, "boom: missing config") {
		t.Fatalf("initialize failure logged as %+v: %s", rec, logs.String())
	}

	// A 2025-11-25 client's session: its child's end is logged the same way.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	const msg = "bridge: the upstream of a legacy client session exited"
	deadline := time.Now().Add(testcmd.Patience)
	for exitRecord(logs.String(), msg).Msg == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rec := exitRecord(logs.String(), msg); !strings.Contains(rec.Exit, "exit status 3") || !strings.Contains(rec.StderrTail, "boom: missing config") {
		t.Fatalf("a legacy client session's child's end logged as %+v: %s", rec, logs.String())
	}
}

// exitLine is a log record with the exit attributes of an upstream.
type exitLine struct {
	Msg        string
	Exit       string
	StderrTail string `json:"stderr_tail"`
}

// exitRecord is the last record of log with message msg.
func exitRecord(log, msg string) exitLine {
	var rec exitLine
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var r exitLine
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Msg == msg {
			rec = r
		}
	}
	return rec
}
