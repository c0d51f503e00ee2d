package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// TestAdvertiseReplicas: a bridged stdio upstream with a Redis store turns
// replicas on: one log line names the node and the advertised URL (the
// listener's port), which the directory holds, sealed, under the store's prefix; on
// every interface without --advertise the proxy refuses to start.
func TestAdvertiseReplicas(t *testing.T) {
	rurl := testredis.Start(t)
	legacy := []string{"--replay", rurl, "--upstream-env", testcmd.StdioServerEnv + "=legacy", "--", os.Args[0]}

	var stderr testcmd.Buffer
	a := &base.App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := run(context.Background(), a, append([]string{"proxy", "--addr", "0.0.0.0:0"}, legacy...)); code == 0 || !strings.Contains(stderr.String(), "--advertise") {
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

// TestREADMEReplicas: the README's two-replica example parses, and each
// replica advertises its own --addr and shares the key ring and the store.
func TestREADMEReplicas(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- replicas -->\n *```sh\n(.*?)```\n *<!-- /replicas -->").FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("README.md has no <!-- replicas --> block")
	}
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	var replicas []*proxy.Config
	for line := range strings.Lines(m[1]) {
		line, _, _ = strings.Cut(line, "# ")
		words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
		if len(words) < 2 || words[0] != "mrtr" || words[1] != "proxy" {
			continue
		}
		c, err := proxy.Parse(a, words[2:])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if c.Advertise != "http://"+c.Addr+"/mcp" {
			t.Errorf("%q advertises %q, want its own --addr", line, c.Advertise)
		}
		replicas = append(replicas, c)
	}
	if len(replicas) != 2 || replicas[0].Addr == replicas[1].Addr || replicas[0].Replay != replicas[1].Replay ||
		replicas[0].KeysFile != replicas[1].KeysFile || !strings.HasPrefix(replicas[0].Replay, "redis://") {
		t.Fatalf("the example's replicas: %d, want two on their own addresses sharing --keys and --replay", len(replicas))
	}
}
