package serve

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestServeFlagsTyped pins issue 12's CLI bullet: switches take no
// argument, --help names each flag's type, and a bad value is named with
// its flag (and its variable when it came from the environment).
func TestServeFlagsTyped(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := Parse(a, []string{"--stdio", "--ttl", "90s", "--max-rounds", "3", "--max-conns", "7", "--read-timeout", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.stdio || c.Ttl != 90*time.Second || c.MaxRounds != 3 || c.MaxConns != 7 || c.ReadTimeout != 5*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c, err := Parse(a, []string{"--stdio=false"}); err != nil || c.stdio {
		t.Fatalf("--stdio=false: %v %v", c, err)
	}

	var help bytes.Buffer
	a.Stdout = &help // help asked for goes to stdout
	if _, err := Parse(a, []string{"--help"}); err == nil {
		t.Fatal("--help parsed")
	}
	for _, want := range []string{"-ttl duration", "-max-rounds int", "-max-body size", "-read-timeout duration", "-max-conns int",
		"-session-timeout duration", "-max-sessions int", "$MRTR_TTL", "smaller of the two"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, help.String())
		}
	}
	if strings.Contains(help.String(), "-stdio string") || strings.Contains(help.String(), "-ttl string") {
		t.Errorf("--help shows string-typed flags:\n%s", help.String())
	}

	// Command-line errors name the flag and the value.
	var errOut bytes.Buffer
	a.Stderr = &errOut
	if _, err := Parse(a, []string{"--ttl", "soon"}); err == nil || !strings.Contains(errOut.String(), `--ttl: "soon" is not a valid duration`) {
		t.Fatalf("--ttl soon: %v %q", err, errOut.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "-5s"}, `--ttl: "-5s" is not a positive duration`},
		{[]string{"--drain-timeout", "-1s"}, `--drain-timeout: "-1s" is negative (0 stops at once)`},
		{[]string{"--max-conns", "0"}, "--max-conns: 0 is below the minimum of 1"},
		{[]string{"--max-sessions", "0"}, "--max-sessions: 0 is below"},
		{[]string{"--read-timeout", "0s"}, "--read-timeout:"},
		{[]string{"--log-format", "xml"}, `--log-format: "xml" is not one of text, json`},
	} {
		if _, err := Parse(a, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}

	// Environment values: the flag wins; errors name the variable.
	env := map[string]string{"MRTR_STDIO": "true", "MRTR_TTL": "2m", "MRTR_MAX_CONNS": "9"}
	a.Getenv = func(k string) string { return env[k] }
	c, err = Parse(a, []string{"--ttl", "3m"})
	if err != nil || !c.stdio || c.Ttl != 3*time.Minute || c.MaxConns != 9 {
		t.Fatalf("env fallback: %+v %v", c, err)
	}
	for k, tc := range map[string]string{
		"MRTR_STDIO":           `$MRTR_STDIO (--stdio): "maybe" is not a valid boolean`,
		"MRTR_MAX_ROUNDS":      `$MRTR_MAX_ROUNDS (--max-rounds): "maybe" is not a valid int`,
		"MRTR_SESSION_TIMEOUT": `$MRTR_SESSION_TIMEOUT (--session-timeout): "maybe" is not a valid duration (like 90s, 5m or 1h30m: a number and a unit)`,
	} {
		env = map[string]string{k: "maybe"}
		if _, err := Parse(a, nil); err == nil || err.Error() != tc {
			t.Errorf("%s=maybe: %v, want %q", k, err, tc)
		}
	}
	env = map[string]string{"MRTR_MAX_CONNS": "-1"}
	if _, err := Parse(a, nil); err == nil || err.Error() != "$MRTR_MAX_CONNS (--max-conns): -1 is below the minimum of 1" {
		t.Errorf("MRTR_MAX_CONNS=-1: %v", err)
	}
	// A range error of a flag given on the command line does not blame
	// the variable.
	if _, err := Parse(a, []string{"--max-conns", "0"}); err == nil || strings.Contains(err.Error(), "MRTR_") {
		t.Errorf("--max-conns 0 with env set: %v", err)
	}
}

// TestHS256SecretLength pins issue 9 item 7: a secret under 32 bytes is
// refused at startup, naming the rule and never echoing the secret.
func TestHS256SecretLength(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	short := strings.Repeat("k", 31)
	_, err := Parse(a, []string{"--auth-hs256-secret", short})
	if err == nil || !strings.Contains(err.Error(), "at least 32 bytes") || strings.Contains(err.Error(), short) {
		t.Fatalf("31-byte secret: %v", err)
	}
	code, _, errOut := runApp(t, "serve", "--addr", "127.0.0.1:0", "--auth-hs256-secret", "x")
	if code != 2 || !strings.Contains(errOut, "at least 32 bytes") {
		t.Fatalf("serve with a 1-byte secret: exit %d, %q", code, errOut)
	}
	if _, err := Parse(a, []string{"--auth-hs256-secret", short + "k"}); err != nil {
		t.Fatalf("32-byte secret: %v", err)
	}
}

// TestAnonymousTTLBoundedByTTL pins issue 9 item 11 in the command: the
// anonymous lifetime is the smaller of --anonymous-ttl and --ttl.
func TestAnonymousTTLBoundedByTTL(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := Parse(a, []string{"--ttl", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.AnonTTL != 2*time.Second {
		t.Fatalf("--ttl 2s: anonymous ttl %v", c.AnonTTL)
	}
	g, closeStore, err := c.NewGuard(context.Background(), c.Logger(io.Discard, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if p := g.Policy(); p.AnonymousTTL != 2*time.Second || p.TTL != 2*time.Second {
		t.Fatalf("guard policy: ttl %v anonymous %v", p.TTL, p.AnonymousTTL)
	}
	c, _ = Parse(a, []string{"--ttl", "10m", "--anonymous-ttl", "30s"})
	if c.AnonTTL != 30*time.Second {
		t.Fatalf("shorter anonymous ttl changed: %v", c.AnonTTL)
	}
}

// TestAuthFlagRules: which --auth-* flags go together, each refusal naming
// the flag and the rule.
func TestAuthFlagRules(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth-jwks", "jwks.json"}, "--auth-issuer: is required"},
		{[]string{"--auth-jwks", "jwks.json", "--auth-issuer", "https://id.example"}, "--auth-audience: is required"},
		{[]string{"--auth-issuer", "https://id.example"}, "--auth-audience: is required"},
		{[]string{"--auth-scopes", "mcp"}, "--auth-issuer: is required"},
		{[]string{"--auth-require-typ"}, "--auth-issuer: is required"},
		{[]string{"--auth-hs256-secret", testcmd.DevSecret, "--auth-jwks", "jwks.json"}, "--auth-jwks: excludes --auth-hs256-secret"},
		{[]string{"--auth-hs256-secret", "short"}, "at least 32 bytes"},
	} {
		_, err := Parse(a, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, ok := range [][]string{
		{"--auth-jwks", "jwks.json", "--auth-issuer", "https://id.example", "--auth-audience", "https://mcp.example/mcp", "--auth-scopes", "a,b"},
		{"--auth-issuer", "https://id.example", "--auth-audience", "https://mcp.example/mcp"}, // discovery
		{"--auth-hs256-secret", testcmd.DevSecret, "--auth-issuer", "dev"},
		{"--auth-hs256-secret", testcmd.DevSecret, "--auth-require-typ"},
	} {
		if _, err := Parse(a, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	env := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_AUTH_JWKS": "jwks.json", "MRTR_AUTH_ISSUER": "https://id.example"}[k]
	}}
	if _, err := Parse(env, nil); err == nil || !strings.Contains(err.Error(), "--auth-audience") {
		t.Errorf("from the environment: %v", err)
	}
}

// TestKeysNone pins issue 21 item 10: --keys none (and MRTR_KEYS=none),
// as --help offers it, is the ephemeral ring.
func TestKeysNone(t *testing.T) {
	_, logs := startServe(t, "--keys", "none")
	if !strings.Contains(logs.String(), "NO KEY RING GIVEN") {
		t.Fatalf("--keys none: %s", logs)
	}
	a := &base.App{Stderr: new(testcmd.Buffer), Getenv: func(k string) string { return map[string]string{"MRTR_KEYS": "none"}[k] }}
	c, err := Parse(a, nil)
	if err != nil || c.KeysFile != "" || c.KeysJSON != "" {
		t.Fatalf("MRTR_KEYS=none: %v %+v", err, c)
	}
}

func TestMetricsAddrFlag(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_METRICS_ADDR": "127.0.0.1:9464"}[k]
	}}
	c, err := Parse(a, nil)
	if err != nil || c.MetricsAddr != "127.0.0.1:9464" {
		t.Fatalf("MRTR_METRICS_ADDR: %v %q", err, c.MetricsAddr)
	}
	c, err = Parse(a, []string{"--metrics-addr", "127.0.0.1:9465"})
	if err != nil || c.MetricsAddr != "127.0.0.1:9465" {
		t.Fatalf("--metrics-addr: %v %q", err, c.MetricsAddr)
	}
	code, _, errOut := runApp(t, "serve", "--metrics-addr", "256.0.0.1:99999", "--addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--metrics-addr") {
		t.Fatalf("bad --metrics-addr: exit %d, %s", code, errOut)
	}
}

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
		c, err := Parse(a, []string{"--replay", u, "--replay-replicas", "1"})
		if err != nil || c.Replay != u || c.Replicas != 1 {
			t.Errorf("--replay %s --replay-replicas 1: %v, %+v", u, err, c)
		}
	}
	env["MRTR_REPLAY"] = "redis-cluster://node1:7000"
	env["MRTR_REPLAY_REPLICAS"] = "2"
	c, err := Parse(a, nil)
	if err != nil || c.Replay != "redis-cluster://node1:7000" || c.Replicas != 2 {
		t.Fatalf("from the environment: %v, %+v", err, c)
	}
	delete(env, "MRTR_REPLAY")
	delete(env, "MRTR_REPLAY_REPLICAS")
	if c, err := Parse(a, nil); err != nil || c.Replicas != 0 {
		t.Fatalf("default --replay-replicas: %v, %+v", err, c)
	}
	for _, bad := range [][]string{
		{"--replay-replicas", "-1"},
		{"--replay-replicas", "one"},
		{"--replay-replicas", "1"}, // with the memory store
		{"--replay", "off", "--replay-replicas", "1"},
		{"--replay", "cluster://:hunter2-pw@node1:7000"},
	} {
		_, err := Parse(a, bad)
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

func TestParseServeFlagsAndEnv(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_TTL": "90s", "MRTR_MAX_ROUNDS": "4", "MRTR_ADDR": "127.0.0.1:9999", "MRTR_LOG_FORMAT": "json", "MRTR_REPLAY_TIMEOUT": "3s"}[k]
	}}
	c, err := Parse(a, []string{"--max-rounds", "6", "--server-id", "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Ttl != 90*time.Second || c.MaxRounds != 6 || c.Addr != "127.0.0.1:9999" || c.ServerID != "node-a" || c.LogFormat != "json" || c.Replay != "memory" || c.ReplayTO != 3*time.Second {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range [][]string{
		{"--ttl", "0s"}, {"--ttl", "soon"}, {"--max-rounds", "0"}, {"--replay", "mysql://x"},
		{"--log-format", "xml"}, {"--max-body", "10"}, {"--log-level", "loud"}, {"--stdio", "maybe"}, {"extra"}, {"--nope"},
		{"--replay-timeout", "0s"}, {"--replay-timeout", "-1s"}, {"--replay-timeout", "fast"},
	} {
		if _, err := Parse(a, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	a.Getenv = func(k string) string {
		if k == "MRTR_TTL" {
			return "forever"
		}
		return ""
	}
	if _, err := Parse(a, nil); err == nil || !strings.Contains(err.Error(), "MRTR_TTL") {
		t.Fatalf("bad env: %v", err)
	}
	a.Getenv = func(string) string { return "" }
	c, err = Parse(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReplayTO != 500*time.Millisecond {
		t.Fatalf("default --replay-timeout = %v, want 500ms", c.ReplayTO)
	}
}

func TestLoadKeysSources(t *testing.T) {
	ring, _ := reqstate.GenerateKeyRing("envkey", nil)
	data, _ := ring.MarshalSecretJSON()
	path := filepath.Join(t.TempDir(), "keys.json")
	other, _ := reqstate.GenerateKeyRing("filekey", nil)
	fdata, _ := other.MarshalSecretJSON()
	os.WriteFile(path, fdata, 0o600)

	env := map[string]string{"MRTR_KEYS": string(data)}
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "envkey"},
		{[]string{"--keys", path}, "filekey"},
	} {
		c, err := Parse(a, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		r, eph, err := c.LoadKeys()
		if err != nil || eph || r.Primary() != tc.want {
			t.Fatalf("%v: %v %v %v", tc.args, r, eph, err)
		}
	}
	env["MRTR_KEYS"] = `{"keys":[{"id":"x","secret":"c2hvcnQ="}]}`
	c, _ := Parse(a, nil)
	if _, _, err := c.LoadKeys(); err == nil || !strings.Contains(err.Error(), "MRTR_KEYS") || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Fatalf("bad MRTR_KEYS: %v", err)
	}
	delete(env, "MRTR_KEYS")
	c, _ = Parse(a, nil)
	if _, eph, err := c.LoadKeys(); err != nil || !eph {
		t.Fatal("no keys should give an ephemeral ring")
	}
}
