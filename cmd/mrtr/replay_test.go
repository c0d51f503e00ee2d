package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// The store's name in the logs carries no password, in the user
// information or in the Sentinel form's password parameter.
func TestReplayNameHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw1@h:6379/0": "redis://h:6379/0",
		"redis://u:pw1@s1:26379?master_name=m&password=pw1&addr=s2:26379": "redis://s1:26379?addr=s2%3A26379&master_name=m&password=xxxxx",
		"rediss-cluster://u:pw1@n1:7000?addr=n2:7001":                     "rediss-cluster://n1:7000?addr=n2%3A7001",
		"memory": "memory",
	} {
		c := &node.CommonConfig{Replay: in}
		if got := c.ReplayName(); got != want || strings.Contains(got, "pw1") {
			t.Errorf("replayName(%q) = %q, want %q", in, got, want)
		}
	}
}

// serve warns once at startup when the Redis it reaches would forget used
// tokens in a restart (no AOF, no replicas), and not otherwise; a server
// whose INFO is forbidden costs one quiet line, not a warning.
func TestReplayDurabilityWarning(t *testing.T) {
	t.Parallel()
	type want struct {
		warnings int
		msg      string
	}
	plain := testredis.StartServer(t)
	aof := testredis.StartServerArgs(t, "--appendonly", "yes")
	replicated := testredis.StartReplicated(t, 1)
	noInfo := testredis.StartServer(t)
	// INFO and CONFIG forbidden, as a locked-down ACL does.
	rc := redis.NewClient(&redis.Options{Addr: noInfo.Addr()})
	if err := rc.Do(t.Context(), "ACL", "SETUSER", "default", "-info", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for _, tc := range []struct {
		name     string
		url      string
		replicas int
		want     want
	}{
		{"neither", plain.URL(), 0, want{1, "neither AOF persistence"}},
		{"aof", aof.URL(), 0, want{0, "durability"}},
		{"replica", replicated.Primary.URL(), 0, want{0, "durability"}},
		{"too few replicas", replicated.Primary.URL(), 2, want{1, "fewer replicas than --replay-replicas"}},
		{"info forbidden", noInfo.URL(), 0, want{0, "could not check"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := &node.CommonConfig{Replay: tc.url, ReplayTO: time.Second, Replicas: tc.replicas}
			_, closeStore, err := c.OpenStore(context.Background(), log)
			if err != nil {
				t.Fatal(err)
			}
			closeStore()
			warnings, found := 0, false
			for line := range strings.Lines(buf.String()) {
				var rec struct{ Level, Msg string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Level == "WARN" {
					warnings++
				}
				found = found || strings.Contains(rec.Msg, tc.want.msg)
			}
			if warnings != tc.want.warnings || !found {
				t.Errorf("%d warnings, want %d, and a line with %q:\n%s", warnings, tc.want.warnings, tc.want.msg, buf.String())
			}
		})
	}
}
