package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// logLinesWith are the JSON log records of logs whose message contains
// msg.
func logLinesWith(logs string, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.Contains(rec["msg"].(string), msg) {
			out = append(out, rec)
		}
	}
	return out
}

// The log lines of a Redis store going down and coming back.
const (
	storeDownMsg = "redis single-use store: cannot connect; resumes fail closed until it is back (said once, and once when it is)"
	storeBackMsg = "redis single-use store: connected again"
)

// TestStoreOutageNamedAndLoggedOnce pins issue 30 item 11: while Redis is
// down a resume is refused with -32603 naming the store and saying to try
// again (no address, no Redis error); the log says once that it is down
// (no go-redis "failed to dial" line at info each time it is tried) and
// once that it is back, with the failed dials counted.
func TestStoreOutageNamedAndLoggedOnce(t *testing.T) {
	srv := testredis.StartServer(t)
	url, logs := startServe(t, "--replay", srv.URL())
	base := strings.TrimSuffix(url, "/mcp")
	srv.Stop()
	for range 5 {
		if code, _ := testcmd.GetHealth(t, base+"/readyz"); code != 503 {
			t.Fatalf("/readyz with Redis stopped: %d", code)
		}
	}
	_, _, err := runCall(t, t.Context(), strings.NewReader("y\n"), nil, url, "deploy", "--arg", "service=api", "--arg", "env=staging")
	if err == nil || err.Error() != "error -32603: the single-use store is unavailable; try again" {
		t.Errorf("a resume with Redis down: %v; want the store named, nothing of the cause", err)
	}
	if n := len(testcmd.LogLines(logs, storeDownMsg)); n != 1 {
		t.Errorf("%d lines say the store went down, want 1:\n%s", n, logs)
	}
	for _, rec := range logLinesWith(logs.String(), "failed to dial") {
		if rec["level"] != "DEBUG" {
			t.Errorf("go-redis's failed dial logged at %v, want DEBUG: %v", rec["level"], rec)
		}
	}

	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for code, _ := testcmd.GetHealth(t, base+"/readyz"); code != 200; code, _ = testcmd.GetHealth(t, base+"/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready again after Redis came back:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _, err := runCall(t, t.Context(), strings.NewReader("y\n"), nil, url, "deploy", "--arg", "service=api", "--arg", "env=staging")
	if err != nil || !strings.HasSuffix(out, "deployed api to staging\n") {
		t.Errorf("a resume with Redis back: %v %q", err, out)
	}
	back := testcmd.LogLines(logs, storeBackMsg)
	if len(back) != 1 || back[0]["addr"] != srv.Addr() || back[0]["failed_dials"].(float64) < 5 || back[0]["down_for"] == nil {
		t.Errorf("the end of the outage: %v, want one line with the address and at least 5 failed dials:\n%s", back, logs)
	}
	if n := len(testcmd.LogLines(logs, storeDownMsg)); n != 1 {
		t.Errorf("%d lines say the store went down, want 1", n)
	}
}
