package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// TestAdvertiseFlag: --advertise takes an http(s) URL only.
func TestAdvertiseFlag(t *testing.T) {
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	c, err := a.parseProxy([]string{"--upstream", "http://127.0.0.1:3000/mcp", "--advertise", "http://10.0.0.5:8080/mcp"})
	if err != nil || c.advertise != "http://10.0.0.5:8080/mcp" {
		t.Fatalf("advertise %q, %v", c.advertise, err)
	}
	for _, bad := range []string{"10.0.0.5:8080", "ftp://h/mcp", "http:///mcp"} {
		if _, err := a.parseProxy([]string{"--upstream", "http://127.0.0.1:3000/mcp", "--advertise", bad}); err == nil || !strings.Contains(err.Error(), "--advertise") {
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

// TestAdvertiseReplicas: a bridged stdio upstream with a Redis store turns
// replicas on: one log line names the node and the advertised URL (the
// listener's port), which the directory holds, sealed, under the store's prefix; on
// every interface without --advertise the proxy refuses to start.
func TestAdvertiseReplicas(t *testing.T) {
	rurl := testredis.Start(t)
	legacy := []string{"--replay", rurl, "--upstream-env", stdioServerEnv + "=legacy", "--", os.Args[0]}

	var stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}
	if code := a.run(context.Background(), append([]string{"proxy", "--addr", "0.0.0.0:0"}, legacy...)); code == 0 || !strings.Contains(stderr.String(), "--advertise") {
		t.Fatalf("--addr 0.0.0.0:0 without --advertise: exit %d: %s", code, stderr.String())
	}

	mcpURL, logs := startProxyCmd(t, legacy...)
	var node, advertise string
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line struct{ Msg, Node, Advertise string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "mrtr proxy: replicas on") {
			node, advertise = line.Node, line.Advertise
		}
	}
	if node == "" || advertise != mcpURL {
		t.Fatalf("replicas log line: node %q advertise %q (serving %s): %s", node, advertise, mcpURL, logs.String())
	}
	o, _ := redis.ParseURL(rurl)
	rc := redis.NewClient(o)
	defer rc.Close()
	// The entry is sealed by the proxy's key ring (internal/peers
	// TestSealedEntries): present, and no URL in the clear.
	if got := rc.Get(t.Context(), redisstore.DefaultPrefix+"peer:"+node).Val(); !strings.HasPrefix(got, "v1.") || strings.Contains(got, "127.0.0.1") {
		t.Fatalf("the directory holds %q for this node, want an entry sealed for %s", got, mcpURL)
	}
}
