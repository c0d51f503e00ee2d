package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// passwordRedis is a real Redis that wants password pw.
func passwordRedis(t *testing.T, pw string) *testredis.Server {
	t.Helper()
	srv := testredis.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestServeRefusesRedisThatRefuses pins issue 21 item 7: a Redis that
// answers WRONGPASS, NOAUTH or "ERR DB index is out of range" stops the
// server at startup naming the cause (never the password); one that is
// not there yet does not.
func TestServeRefusesRedisThatRefuses(t *testing.T) {
	srv := passwordRedis(t, "right-pw")
	for _, tc := range []struct{ url, want string }{
		{"redis://:wrong-pw@" + srv.Addr() + "/0", "Redis refused the user or password of --replay (WRONGPASS"},
		{"redis://" + srv.Addr() + "/0", "Redis wants a password and --replay gives none"},
		{"redis://:right-pw@" + srv.Addr() + "/99", "Redis has no such database"},
	} {
		code, _, errOut := runApp(t, "serve", "--addr", "127.0.0.1:0", "--replay", tc.url)
		if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "mrtr serve: --replay redis://"+srv.Addr()) {
			t.Errorf("serve --replay %s: exit %d, stderr:\n%s\nwant %q", tc.url, code, errOut, tc.want)
		}
		if strings.Contains(errOut, "-pw") {
			t.Errorf("serve --replay %s shows the password:\n%s", tc.url, errOut)
		}
		if strings.Contains(errOut, "not reachable yet") || strings.Contains(errOut, "mrtr serving") {
			t.Errorf("serve --replay %s started anyway:\n%s", tc.url, errOut)
		}
	}
	// Nothing listening: a warning, and the server starts.
	gone := testredis.StartServer(t)
	gone.Stop()
	url, logs := startServe(t, "--replay", gone.URL())
	if !strings.Contains(logs.String(), "not reachable yet") {
		t.Errorf("no warning for a Redis not there yet: %s", logs)
	}
	base := strings.TrimSuffix(url, "/mcp")
	// /readyz: a stopped Redis is unreachable, not a timeout.
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","store":"unreachable"}}` {
		t.Errorf("/readyz with Redis stopped: %d %s", code, body)
	}
}

// TestReadyzRedisRefused pins issue 21 item 7: when Redis starts refusing
// the password after startup, /readyz says "refused", not "unreachable".
func TestReadyzRedisRefused(t *testing.T) {
	srv := testredis.StartServer(t)
	url, _ := startServe(t, "--replay", srv.URL())
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "requirepass", "new-pw").Err(); err != nil {
		t.Fatal(err)
	}
	// Existing connections stay authenticated; drop them.
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "new-pw"})
	defer c2.Close()
	if err := c2.Do(context.Background(), "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 503 || body != `{"status":"unready","checks":{"keys":"ok","store":"refused"}}` {
		t.Errorf("/readyz with the password refused: %d %s", code, body)
	}
}

// TestServeReplayUnixSocket pins issue 21 item 8: --replay takes a
// unix:// URL, and the store answers over the socket.
func TestServeReplayUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	testredis.StartServerArgs(t, "--unixsocket", sock, "--unixsocketperm", "700")
	url, logs := startServe(t, "--replay", "unix://"+sock+"?db=2")
	if strings.Contains(logs.String(), "not reachable") {
		t.Fatalf("unix socket not reachable: %s", logs)
	}
	base := strings.TrimSuffix(url, "/mcp")
	if code, body := testcmd.GetHealth(t, base+"/readyz"); code != 200 || body != `{"status":"ok","checks":{"keys":"ok","store":"ok"}}` {
		t.Fatalf("/readyz over the socket: %d %s", code, body)
	}
	a := callDeploy(t, url, "staging", "", nil)
	if got := callDeploy(t, url, "staging", a.state, nil); got.text != "deployed api to staging" {
		t.Fatalf("resume: %+v", got)
	}
	if got := callDeploy(t, url, "staging", a.state, nil); got.reason != "replayed" {
		t.Fatalf("replay over the socket: %+v", got)
	}
}

// TestReplayErrorNamesValue pins issue 21 item 8: a --replay value that
// is no store is repeated in the error, with its password replaced.
func TestReplayErrorNamesValue(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:6379":                  `--replay: "localhost:6379" is not memory, off`,
		"redis":                           `--replay: "redis" is not memory, off`,
		"cluster://:hunter2-pw@n1:7000":   `--replay: "cluster://:xxxxx@n1:7000" is not memory`,
		"sentinel://h:1?password=hunter2": `--replay: "sentinel://h:1?password=xxxxx" is not`,
		"ht tp://:hunter2@h":              `--replay: a value that does not parse as a URL is not`,
	} {
		code, _, errOut := runApp(t, "serve", "--replay", in)
		if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "hunter2") {
			t.Errorf("--replay %s: exit %d, stderr %q, want %q", in, code, errOut, want)
		}
	}
}
