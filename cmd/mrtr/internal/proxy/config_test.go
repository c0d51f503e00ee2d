package proxy

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
)

// TestAuditUpstream: how audit lines name an upstream URL: without its
// userinfo, query and fragment, where a credential rides (?api_key=...);
// cmd/mrtr's TestUpstreamURLShown checks the trail and the log.
func TestAuditUpstream(t *testing.T) {
	for raw, want := range map[string]string{
		"https://u:pw@h.example:8443/a/mcp?api_key=SECRET#frag": "https://h.example:8443/a/mcp",
		"http://127.0.0.1:9/mcp?token=SECRET":                   "http://127.0.0.1:9/mcp",
		"http://h/a%2Fb/mcp":                                    "http://h/a%2Fb/mcp",
	} {
		if got := auditUpstream(&Config{Upstream: raw}); got != want {
			t.Errorf("auditUpstream(%s) = %s, want %s", raw, got, want)
		}
	}

}

// TestPerCallerDefault: --max-procs-per-caller 0 is a quarter of
// --max-procs, at least 1.
func TestPerCallerDefault(t *testing.T) {
	for _, c := range []struct{ procs, given, want int }{{16, 0, 4}, {6, 0, 1}, {1, 0, 1}, {16, 9, 9}} {
		u := UpstreamConfig{maxProcs: c.procs, maxProcsPerCaller: c.given}
		if got := u.perCaller(); got != c.want {
			t.Errorf("--max-procs %d --max-procs-per-caller %d: %d, want %d", c.procs, c.given, got, c.want)
		}
	}
}

func TestParseProxyFlagsAndEnv(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_UPSTREAM": "http://127.0.0.1:3000/mcp", "MRTR_MAX_HELD": "2048", "MRTR_REPLAY": "off"}[k]
	}}
	c, err := Parse(a, []string{"--upstream-timeout", "30s", "--forward-authorization", "--max-upstream-state", "100", "--server-id", "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstream != "http://127.0.0.1:3000/mcp" || c.maxHeld != 2048 || c.Replay != "off" || c.upstreamTimeout != 30*time.Second ||
		!c.forwardAuth || c.maxState != 100 || c.ServerID != "gw" {
		t.Fatalf("parsed %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--upstream: is required"},
		{[]string{"--upstream", "ftp://x"}, `--upstream: "ftp://x" is not an http`},
		{[]string{"--upstream", "http://x", "--max-held", "10"}, "--max-held: 10 B is below the minimum of 1 KiB"},
		{[]string{"--upstream", "http://x", "--upstream-timeout", "0s"}, "--upstream-timeout"},
	} {
		a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		_, err := Parse(a, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestAdvertiseFlag: --advertise takes an http(s) URL only.
func TestAdvertiseFlag(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := Parse(a, []string{"--upstream", "http://127.0.0.1:3000/mcp", "--advertise", "http://10.0.0.5:8080/mcp"})
	if err != nil || c.Advertise != "http://10.0.0.5:8080/mcp" {
		t.Fatalf("advertise %q, %v", c.Advertise, err)
	}
	for _, bad := range []string{"10.0.0.5:8080", "ftp://h/mcp", "http:///mcp"} {
		if _, err := Parse(a, []string{"--upstream", "http://127.0.0.1:3000/mcp", "--advertise", bad}); err == nil || !strings.Contains(err.Error(), "--advertise") {
			t.Errorf("--advertise %s: err %v", bad, err)
		}
	}
}

// TestAdvertiseDefault: the default is http://ADDR/mcp with the port the
// listener got; an address on every interface needs --advertise.
func TestAdvertiseDefault(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080"} {
		if err := checkAdvertise(addr, ""); err == nil || !strings.Contains(err.Error(), "--advertise") {
			t.Errorf("--addr %s without --advertise: err %v", addr, err)
		}
		if err := checkAdvertise(addr, "http://10.0.0.5:8080/mcp"); err != nil {
			t.Errorf("--addr %s with --advertise: %v", addr, err)
		}
	}
	if err := checkAdvertise("10.0.0.5:8080", ""); err != nil {
		t.Error(err)
	}
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	for addr, want := range map[string]string{
		"127.0.0.1:0":    "http://127.0.0.1:41234/mcp",
		"10.0.0.5:41234": "http://10.0.0.5:41234/mcp",
		"[::1]:0":        "http://[::1]:41234/mcp",
	} {
		if got := advertiseURL(addr, "", bound); got != want {
			t.Errorf("advertiseURL(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := advertiseURL("0.0.0.0:0", "https://px.internal/mcp", bound); got != "https://px.internal/mcp" {
		t.Errorf("an explicit --advertise is kept: %s", got)
	}
}

// TestAdvertiseHints pins issue 30 item 14: the --advertise error on
// every interface suggests a URL with the user's own port, and a default
// advertised URL on a loopback --addr is warned about (replicas on other
// hosts cannot reach it), an explicit one or another address not.
func TestAdvertiseHints(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:9090": "--advertise http://10.0.0.5:9090/mcp",
		"[::]:8443":    "--advertise http://10.0.0.5:8443/mcp",
		":0":           "--advertise http://10.0.0.5:PORT/mcp",
	} {
		if err := checkAdvertise(addr, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--addr %s: %v, want it to suggest %s", addr, err, want)
		}
	}
	for addr, warned := range map[string]bool{"127.0.0.1:8091": true, "[::1]:8091": true, "localhost:8091": true, "10.0.0.5:8080": false} {
		if got := loopbackAdvertise(addr, "") != ""; got != warned {
			t.Errorf("--addr %s without --advertise: warned %v, want %v", addr, got, warned)
		}
		if loopbackAdvertise(addr, "http://"+addr+"/mcp") != "" {
			t.Errorf("--addr %s with --advertise: warned", addr)
		}
	}

	rurl := testredis.Start(t)
	legacy := []string{"--replay", rurl, "--upstream-env", testcmd.StdioServerEnv + "=legacy", "--", os.Args[0]}
	_, logs := startProxyCmd(t, legacy...)
	if n := strings.Count(logs.String(), "replicas on with a loopback --addr and no --advertise"); n != 1 {
		t.Errorf("a default advertised URL on 127.0.0.1: warned %d times, want once:\n%s", n, logs)
	}
}

// TestParseProxyCommand: what follows -- is the command, never flags.
func TestParseProxyCommand(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, err := Parse(a, []string{"--upstream-era", "legacy", "--roots", "file:///a", "--", "npx", "-y", "pkg", "--addr", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Command, " ") != "npx -y pkg --addr x" || c.era != "legacy" || len(c.roots) != 1 || c.Addr == "x" {
		t.Fatalf("parsed %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--"}, "-- must be followed by the command"},
		{[]string{"--upstream", "http://x/mcp", "--", "cmd"}, "both name an upstream"},
		{[]string{"--upstream-era", "old", "--", "cmd"}, "--upstream-era"},
		{[]string{"--upstream-env", "=x", "--", "cmd"}, "--upstream-env"},
	} {
		a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		c, err := Parse(a, tc.args)
		if err == nil && tc.want == "--upstream-env" {
			_, _, err = c.upstreamTransport(context.Background(), nil, nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestUpstreamTransportFlag pins issue 27 item 2's switch:
// --upstream-transport (MRTR_UPSTREAM_TRANSPORT) is std or lean, lean by
// default where the proxy package can run it and std elsewhere, and lean
// where it cannot run is an error at start.
func TestUpstreamTransportFlag(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*Config, error) {
		a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
		return Parse(a, append([]string{"--upstream", "http://127.0.0.1:1/mcp"}, args...))
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "std"
	if mrtrproxy.LeanTransportSupported {
		want = "lean"
	}
	if c.upTransport != want {
		t.Fatalf("default --upstream-transport %q, want %q", c.upTransport, want)
	}
	if c, err := parse(nil, "--upstream-transport", "std"); err != nil || c.upTransport != "std" {
		t.Fatalf("--upstream-transport std: %v", err)
	}
	if c, err := parse(map[string]string{"MRTR_UPSTREAM_TRANSPORT": "std"}); err != nil || c.upTransport != "std" {
		t.Fatalf("MRTR_UPSTREAM_TRANSPORT=std: %v", err)
	}
	if _, err := parse(nil, "--upstream-transport", "fast"); err == nil || !strings.Contains(err.Error(), "--upstream-transport") {
		t.Fatalf("--upstream-transport fast: %v", err)
	}
	_, err = parse(nil, "--upstream-transport", "lean")
	if mrtrproxy.LeanTransportSupported != (err == nil) {
		t.Fatalf("--upstream-transport lean (supported %v): %v", mrtrproxy.LeanTransportSupported, err)
	}
	if err != nil && !strings.Contains(err.Error(), "use std") {
		t.Fatalf("--upstream-transport lean where unsupported: %q names no way out", err)
	}
}

// TestSizeFlags: the proxy's sizes take units, from a flag or its
// variable (base's TestSizes checks the units themselves).
func TestSizeFlags(t *testing.T) {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"MRTR_MAX_UPSTREAM_STATE": "32 KiB"}[k]
	}}
	c, err := Parse(a, []string{"--upstream", "http://127.0.0.1:3000/mcp", "--max-held", "4 MiB", "--max-body", "2MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if c.maxHeld != 4<<20 || c.MaxBodyBytes != 2<<20 || c.maxState != 32<<10 {
		t.Fatalf("max-held %d, max-body %d, max-upstream-state %d", c.maxHeld, c.MaxBodyBytes, c.maxState)
	}
}
