package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
)

// trailLine is what these tests read of an audit line.
type trailLine struct {
	Event, Flow, Reason, Method, Target, Node string
	Round                                     int
	ForwardedBy                               string `json:"forwarded_by"`
}

// readTrailLines returns the lines of the audit trail at path.
func readTrailLines(t *testing.T, path string) []trailLine {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []trailLine
	for line := range strings.Lines(string(raw)) {
		var l trailLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line in %s: %v", path, err)
		}
		out = append(out, l)
	}
	return out
}

// replicaNode is the node id of the "mrtr proxy: replicas on" record of
// a JSON log.
func replicaNode(logs string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct{ Msg, Node string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "mrtr proxy: replicas on:") && line.Node != "" {
			return line.Node
		}
	}
	return ""
}

// TestReplicasAuditForwarded (issue 39, item 4): a resume one replica
// forwards to the one holding its call is recorded by the holder with the
// forwarding replica on its lines (forwarded_by); a resume whose holder
// is gone is answered "start over" and recorded by the replica that
// answers it: rejected, reason holder_gone, with its flow.
func TestReplicasAuditForwarded(t *testing.T) {
	rurl := testredis.Start(t)
	dir := t.TempDir()
	ring := filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, ring, testcmd.GenKey(t, "k1"))
	up := legacyHTTPServer(t)
	args := func(trail string) []string {
		return []string{"--upstream", up, "--keys", ring, "--replay", rurl, "--audit", trail}
	}
	trailA, trailB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	a := startDrainedProxy(t, args(trailA)...)
	b := startDrainedProxy(t, args(trailB)...)
	nodeB := replicaNode(b.logs.String())
	if nodeB == "" || replicaNode(a.logs.String()) == "" {
		t.Fatalf("replicas not on:\nA: %s\nB: %s", a.logs.String(), b.logs.String())
	}

	// Paused on A, resumed through B: A records the resume, naming B.
	tok, key := pauseDelete(t, a.url, "x")
	if got := resumeDelete(t, b.url, "x", tok, key); !strings.Contains(got, "deleted x") {
		t.Fatalf("resume through B: %s", got)
	}
	var forwarded []trailLine
	for _, l := range readTrailLines(t, trailA) {
		if l.Event == "resumed" || (l.Event == "completed" && l.Round > 0) {
			forwarded = append(forwarded, l)
		}
	}
	if len(forwarded) != 2 {
		t.Fatalf("A's trail: %+v, want a resumed and a completed line for the forwarded resume", readTrailLines(t, trailA))
	}
	for _, l := range forwarded {
		if l.ForwardedBy != nodeB {
			t.Errorf("A's %s line says forwarded_by %q, want B's node %q", l.Event, l.ForwardedBy, nodeB)
		}
	}
	for _, l := range readTrailLines(t, trailA) {
		if l.Event == "paused" && l.ForwardedBy != "" {
			t.Errorf("A's own pause says forwarded_by %q", l.ForwardedBy)
		}
	}

	// Paused on A, A gone, resumed through B: B answers "start over" and
	// records it.
	tok, key = pauseDelete(t, a.url, "y")
	var flow string
	for _, l := range readTrailLines(t, trailA) {
		if l.Event == "paused" {
			flow = l.Flow // the last one: y's
		}
	}
	a.force()
	if code := a.exit(10 * time.Second); code == -1 {
		t.Fatal("A did not stop")
	}
	res, e := testcmd.RPCPost(t, b.url, "tools/call", map[string]any{"name": "delete", "arguments": map[string]any{"item": "y"}, "requestState": tok,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}})
	if e == nil || !strings.Contains(string(e["message"]), "start the call over") || string(e["code"]) != "-32603" {
		t.Fatalf("resume through B of a call A held: %v %v, want -32603 start over", res, e)
	}
	var rejected []trailLine
	for _, l := range readTrailLines(t, trailB) {
		if l.Event == "rejected" {
			rejected = append(rejected, l)
		}
	}
	if len(rejected) != 1 || rejected[0].Reason != "holder_gone" || rejected[0].Flow != flow || flow == "" || rejected[0].Round != 1 ||
		rejected[0].Method != "tools/call" || rejected[0].Target != "delete" {
		t.Fatalf("B's rejected lines: %+v, want one holder_gone line for flow %q round 1", rejected, flow)
	}
}
