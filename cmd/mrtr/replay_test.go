package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// --replay takes the one-server, Sentinel and Cluster forms of DESIGN.md
// ("Many nodes on Redis"), --replay-replicas a count, each also from the
// environment.
func TestParseReplayForms(t *testing.T) {
	env := map[string]string{}
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	for _, u := range []string{
		"redis://127.0.0.1:6379/0",
		"rediss://:pw@redis.example:6380/1",
		"redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379",
		"rediss://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379",
		"redis-cluster://node1:7000?addr=node2:7001&addr=node3:7002",
		"rediss-cluster://node1:7000?addr=node2:7001",
	} {
		c, err := serve.ParseServe(a, []string{"--replay", u, "--replay-replicas", "1"})
		if err != nil || c.Replay != u || c.Replicas != 1 {
			t.Errorf("--replay %s --replay-replicas 1: %v, %+v", u, err, c)
		}
	}
	env["MRTR_REPLAY"] = "redis-cluster://node1:7000"
	env["MRTR_REPLAY_REPLICAS"] = "2"
	c, err := serve.ParseServe(a, nil)
	if err != nil || c.Replay != "redis-cluster://node1:7000" || c.Replicas != 2 {
		t.Fatalf("from the environment: %v, %+v", err, c)
	}
	delete(env, "MRTR_REPLAY")
	delete(env, "MRTR_REPLAY_REPLICAS")
	if c, err := serve.ParseServe(a, nil); err != nil || c.Replicas != 0 {
		t.Fatalf("default --replay-replicas: %v, %+v", err, c)
	}
	for _, bad := range [][]string{
		{"--replay-replicas", "-1"},
		{"--replay-replicas", "one"},
		{"--replay-replicas", "1"}, // with the memory store
		{"--replay", "off", "--replay-replicas", "1"},
		{"--replay", "cluster://:hunter2-pw@node1:7000"},
	} {
		_, err := serve.ParseServe(a, bad)
		if err == nil {
			t.Errorf("%v accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: error %q shows the password", bad, err)
		}
	}
	// A malformed URL of the new forms stops serve with the reason, not
	// the password.
	for _, u := range []string{
		"redis://:hunter2-pw@sentinel1:26379?master_name=",
		"redis-cluster://:hunter2-pw@node1:7000?addr=node2",
		"redis-cluster://:hunter2-pw@node1:7000/3",
	} {
		code, _, errOut := runApp(t, "serve", "--replay", u)
		if code != 1 || !strings.Contains(errOut, "--replay: redisstore: parse URL") || strings.Contains(errOut, "hunter2") {
			t.Errorf("serve --replay %s: exit %d, stderr %q", u, code, errOut)
		}
	}
}

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
