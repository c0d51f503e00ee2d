package main

import (
	"bytes"
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
)

// TestServeFlagsTyped pins issue 12's CLI bullet: switches take no
// argument, --help names each flag's type, and a bad value is named with
// its flag (and its variable when it came from the environment).
func TestServeFlagsTyped(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := serve.ParseServe(a, []string{"--stdio", "--ttl", "90s", "--max-rounds", "3", "--max-conns", "7", "--read-timeout", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Stdio || c.Ttl != 90*time.Second || c.MaxRounds != 3 || c.MaxConns != 7 || c.ReadTimeout != 5*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c, err := serve.ParseServe(a, []string{"--stdio=false"}); err != nil || c.Stdio {
		t.Fatalf("--stdio=false: %v %v", c, err)
	}

	var help bytes.Buffer
	a.Stdout = &help // help asked for goes to stdout
	if _, err := serve.ParseServe(a, []string{"--help"}); err == nil {
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
	if _, err := serve.ParseServe(a, []string{"--ttl", "soon"}); err == nil || !strings.Contains(errOut.String(), `--ttl: "soon" is not a valid duration`) {
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
		if _, err := serve.ParseServe(a, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}

	// Environment values: the flag wins; errors name the variable.
	env := map[string]string{"MRTR_STDIO": "true", "MRTR_TTL": "2m", "MRTR_MAX_CONNS": "9"}
	a.Getenv = func(k string) string { return env[k] }
	c, err = serve.ParseServe(a, []string{"--ttl", "3m"})
	if err != nil || !c.Stdio || c.Ttl != 3*time.Minute || c.MaxConns != 9 {
		t.Fatalf("env fallback: %+v %v", c, err)
	}
	for k, tc := range map[string]string{
		"MRTR_STDIO":           `$MRTR_STDIO (--stdio): "maybe" is not a valid boolean`,
		"MRTR_MAX_ROUNDS":      `$MRTR_MAX_ROUNDS (--max-rounds): "maybe" is not a valid int`,
		"MRTR_SESSION_TIMEOUT": `$MRTR_SESSION_TIMEOUT (--session-timeout): "maybe" is not a valid duration (like 90s, 5m or 1h30m: a number and a unit)`,
	} {
		env = map[string]string{k: "maybe"}
		if _, err := serve.ParseServe(a, nil); err == nil || err.Error() != tc {
			t.Errorf("%s=maybe: %v, want %q", k, err, tc)
		}
	}
	env = map[string]string{"MRTR_MAX_CONNS": "-1"}
	if _, err := serve.ParseServe(a, nil); err == nil || err.Error() != "$MRTR_MAX_CONNS (--max-conns): -1 is below the minimum of 1" {
		t.Errorf("MRTR_MAX_CONNS=-1: %v", err)
	}
	// A range error of a flag given on the command line does not blame
	// the variable.
	if _, err := serve.ParseServe(a, []string{"--max-conns", "0"}); err == nil || strings.Contains(err.Error(), "MRTR_") {
		t.Errorf("--max-conns 0 with env set: %v", err)
	}
}

// TestHS256SecretLength pins issue 9 item 7: a secret under 32 bytes is
// refused at startup, naming the rule and never echoing the secret.
func TestHS256SecretLength(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	short := strings.Repeat("k", 31)
	_, err := serve.ParseServe(a, []string{"--auth-hs256-secret", short})
	if err == nil || !strings.Contains(err.Error(), "at least 32 bytes") || strings.Contains(err.Error(), short) {
		t.Fatalf("31-byte secret: %v", err)
	}
	code, _, errOut := runApp(t, "serve", "--addr", "127.0.0.1:0", "--auth-hs256-secret", "x")
	if code != 2 || !strings.Contains(errOut, "at least 32 bytes") {
		t.Fatalf("serve with a 1-byte secret: exit %d, %q", code, errOut)
	}
	if _, err := serve.ParseServe(a, []string{"--auth-hs256-secret", short + "k"}); err != nil {
		t.Fatalf("32-byte secret: %v", err)
	}
}

// TestAnonymousTTLBoundedByTTL pins issue 9 item 11 in the command: the
// anonymous lifetime is the smaller of --anonymous-ttl and --ttl.
func TestAnonymousTTLBoundedByTTL(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := serve.ParseServe(a, []string{"--ttl", "2s"})
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
	c, _ = serve.ParseServe(a, []string{"--ttl", "10m", "--anonymous-ttl", "30s"})
	if c.AnonTTL != 30*time.Second {
		t.Fatalf("shorter anonymous ttl changed: %v", c.AnonTTL)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var out bytes.Buffer
		a := &base.App{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" },
			BuildInfo: func() (*debug.BuildInfo, bool) {
				return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/mrtr-go/mrtr", Version: "v0.2.0"},
					Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-30T19:00:00Z"},
						{Key: "vcs.modified", Value: "true"}, {Key: "-ldflags", Value: "-s"}}}, true
			}}
		if code := run(context.Background(), a, []string{arg}); code != 0 {
			t.Fatalf("%s: exit %d", arg, code)
		}
		want := "mrtr 0.2.0\nmodule github.com/mrtr-go/mrtr v0.2.0\ngo go1.26.0\nvcs.revision abc123\nvcs.time 2026-11-30T19:00:00Z\nvcs.modified true\n"
		if out.String() != want {
			t.Fatalf("%s:\n%s\nwant\n%s", arg, out.String(), want)
		}
	}
	// The real build info of the test binary is readable too.
	code, out, _ := runApp(t, "version")
	if code != 0 || !strings.HasPrefix(out, "mrtr "+resolveVersion(version, nil)+"\n") || !strings.Contains(out, "\ngo go1.") {
		t.Fatalf("version: %d %q", code, out)
	}
}
