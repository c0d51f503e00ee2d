package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
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
	if n := len(testcmd.LogLines(logs, node.StoreDownMsg)); n != 1 {
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
	back := testcmd.LogLines(logs, node.StoreBackMsg)
	if len(back) != 1 || back[0]["addr"] != srv.Addr() || back[0]["failed_dials"].(float64) < 5 || back[0]["down_for"] == nil {
		t.Errorf("the end of the outage: %v, want one line with the address and at least 5 failed dials:\n%s", back, logs)
	}
	if n := len(testcmd.LogLines(logs, node.StoreDownMsg)); n != 1 {
		t.Errorf("%d lines say the store went down, want 1", n)
	}
}

// TestStoreWatchSentinelName: a Sentinel client dials its primary under
// go-redis's placeholder address "FailoverClient"; the log names it in
// words instead.
func TestStoreWatchSentinelName(t *testing.T) {
	logs := new(testcmd.Buffer)
	w := node.NewStoreWatch(slog.New(slog.NewJSONHandler(logs, nil)))
	addr := testcmd.FreeAddr(t)
	var d net.Dialer
	dial := w.DialHook(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr) // nothing listens there
	})
	for range 3 {
		if _, err := dial(t.Context(), "tcp", "FailoverClient"); err == nil {
			t.Fatal("a dial to a closed port succeeded")
		}
	}
	recs := testcmd.LogLines(logs, node.StoreDownMsg)
	if len(recs) != 1 || recs[0]["addr"] != "the primary the sentinels name" {
		t.Fatalf("down: %v", recs)
	}
	if o := w.Down["the primary the sentinels name"]; o == nil || o.Failed != 3 {
		t.Fatalf("outage %+v, want 3 failed dials", o)
	}
}
