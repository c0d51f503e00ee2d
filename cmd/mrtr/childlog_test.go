package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/stdio"
)

// TestProxyChildLogReadable pins issue 30 item 12 through the command: a
// child that logs with log/slog (as mrtr serve --stdio does) has its
// warning logged at WARN with its own message (child.msg under the fixed
// message stdio.ChildRecordMsg: issue 35 item 6), not wrapped in an INFO
// record's; and a 2025-11-25 client that closes its session ends it
// plainly, not as an upstream that exited.
func TestProxyChildLogReadable(t *testing.T) {
	url, logs := startProxyCmd(t, "--upstream-env", testcmd.StdioServerEnv+"=legacylog", "--", os.Args[0])
	out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "--legacy")
	if err != nil || !strings.Contains(out, "delete") {
		t.Fatalf("mrtr call --legacy through the proxy: %v\n%s", err, out)
	}
	const ended = "bridge: legacy client session ended; its upstream was stopped"
	deadline := time.Now().Add(testcmd.Patience)
	for len(testcmd.LogLines(logs, ended)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if recs := testcmd.LogLines(logs, ended); len(recs) != 1 || recs[0]["why"] != "closed by its client" || recs[0]["level"] != "INFO" {
		t.Errorf("the session's end: %v, want one INFO record, why closed by its client:\n%s", recs, logs)
	}
	if recs := testcmd.LogLines(logs, "bridge: the upstream of a legacy client session exited"); len(recs) != 0 {
		t.Errorf("a session its client closed logged as an upstream that exited: %v", recs)
	}
	// Issue 35 item 6: under the fixed message, the child's own as
	// child.msg and its level as child.level.
	var warns []map[string]any
	for _, r := range testcmd.LogLines(logs, stdio.ChildRecordMsg) {
		if child, _ := r["child"].(map[string]any); child["msg"] == "NO KEY RING GIVEN: the test child's warning" {
			warns = append(warns, r)
		}
	}
	if len(warns) == 0 {
		t.Fatalf("the child's warning is not logged with its own message as child.msg:\n%s", logs)
	}
	if recs := testcmd.LogLines(logs, "NO KEY RING GIVEN: the test child's warning"); len(recs) != 0 {
		t.Errorf("the child's record logged under the child's message: %v", recs)
	}
	for _, w := range warns {
		child, _ := w["child"].(map[string]any)
		if w["level"] != "WARN" || child["level"] != "WARN" || w["stream"] != "stderr" || w["upstream"] == nil || child["pid"] != "1" || w["pid"] == "1" {
			t.Errorf("the child's warning logged as %v", w)
		}
	}
	if strings.Contains(logs.String(), `level=WARN msg=`) {
		t.Errorf("a child's record wrapped in one of the proxy's:\n%s", logs)
	}
}

// TestProxyNoSuchCommandFirst pins issue 30 item 13: an upstream command
// that cannot run is the first and only thing said, before the key
// ring's warning and the policy line.
func TestProxyNoSuchCommandFirst(t *testing.T) {
	code, out, errOut := runApp(t, "proxy", "--", "no-such-mrtr-upstream")
	want := `mrtr proxy: the upstream command after --: exec: "no-such-mrtr-upstream": executable file not found in $PATH` + "\n"
	if code != 1 || out != "" || errOut != want {
		t.Errorf("proxy -- no-such-mrtr-upstream: exit %d, stderr:\n%s\nwant only %q", code, errOut, want)
	}
}
