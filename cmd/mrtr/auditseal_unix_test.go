//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/audit"
)

// ringPub writes what mrtr audit pubkey --keys RING prints to a file
// and returns its path: the --pub of a node without --audit-key.
func ringPub(t *testing.T, ring string) string {
	t.Helper()
	code, out, errOut := runApp(t, "audit", "pubkey", "--keys", ring)
	if code != 0 {
		t.Fatalf("mrtr audit pubkey: %d %s %s", code, out, errOut)
	}
	if _, err := audit.ParsePublicKey(out); err != nil {
		t.Fatalf("mrtr audit pubkey printed %q: %v", out, err)
	}
	p := filepath.Join(t.TempDir(), "ring.pub")
	os.WriteFile(p, []byte(out), 0o644)
	return p
}

// saveLog writes a child's log to a file: the checkpoint records a log
// pipeline carried off the host.
func saveLog(t *testing.T, p *child, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(p.logs.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sealedServe is a mrtr serve whose trail is signed by a node key
// (evolving, in a directory of its own; no timer checkpoint), after
// three flows: the first checkpoint and nine lines.
type sealedServe struct {
	dir, keys, key, trail string
	args                  []string // to start it again
	p                     *child
}

func startSealed(t *testing.T) *sealedServe {
	t.Helper()
	n := new(sealedServe)
	n.dir, n.keys = ringDir(t)
	n.key, n.trail = filepath.Join(n.dir, "audit.key"), filepath.Join(n.dir, "audit.jsonl")
	n.args = []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", n.keys, "--audit", n.trail, "--audit-key", n.key,
		"--audit-checkpoint", "1h", "--node", "n1"}
	n.p = startChild(t, nil, n.args...)
	c := mcpClient{t, n.p.url}
	for range 3 {
		tok, _ := c.pause()
		c.complete(tok)
	}
	return n
}

// TestAuditCutThenRestartShows pins issue 37 item 4's restart case on a
// real `mrtr serve` (round one verified it clean): lines cut from the
// end of a trail, then a restart: the new process goes on from the
// file's last checkpoint, not its last line, and abandons the lines
// after it by a signed restart record; verify --pub never says sealed
// (3: how many lines were abandoned), and with the checkpoints the log
// carried off the host it names the cut (1: the log's checkpoint 2 is
// not the trail's).
func TestAuditCutThenRestartShows(t *testing.T) {
	n := startSealed(t)
	dir, key, trail, args, p := n.dir, n.key, n.trail, n.args, n.p
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	log1 := saveLog(t, p, "first.log")
	if n := strings.Count(p.logs.String(), `"msg":"mrtr audit checkpoint"`); n != 2 {
		t.Fatalf("%d checkpoint records logged, want 2 (the start's, the final one):\n%s", n, p.logs.String())
	}
	if code, out := runVerify(t, "--pub", key+".pub", "--checkpoints", log1, trail); code != 0 ||
		!strings.Contains(out, "node n1: 11 lines sealed; the final checkpoint: 2 at ") || !strings.Contains(out, "the log's checkpoints: 2 matched") {
		t.Fatalf("verify of the clean trail: %d %s", code, out)
	}
	b, _ := os.ReadFile(trail)
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) != 12 {
		t.Fatalf("%d lines, want 11", len(ls)-1)
	}
	if err := os.Truncate(trail, int64(len(bytes.Join(ls[:8], nil)))); err != nil { // lines 9-11 cut: two call lines and the final checkpoint
		t.Fatal(err)
	}
	p = startChild(t, nil, args...)
	c := mcpClient{t, p.url}
	c.pause()
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	log2 := saveLog(t, p, "second.log")
	code, out := runVerify(t, "--pub", key+".pub", trail)
	if code != 3 || !strings.Contains(out, "7 lines abandoned by 1 restart record") {
		t.Fatalf("verify --pub of a trail cut before a restart: %d %s; want 3, 7 lines abandoned", code, out)
	}
	code, out = runVerify(t, "--pub", key+".pub", "--checkpoints", log1, "--checkpoints", log2, trail)
	if code != 1 || !strings.Contains(out, "two checkpoints for one sequence") {
		t.Fatalf("verify --pub --checkpoints of a trail cut before a restart: %d %s; want 1, the log's checkpoint 2 not the trail's", code, out)
	}
	// The log in text form carries the same checkpoints.
	textLog := filepath.Join(dir, "text.log")
	var text bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(p.logs.String()), "\n") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) == nil && m["checkpoint"] != nil {
			text.WriteString(`time=2026-12-02T00:00:00Z level=INFO msg="mrtr audit checkpoint" checkpoint=` + strconv.Quote(string(m["checkpoint"])) + "\n")
		}
	}
	os.WriteFile(textLog, text.Bytes(), 0o600)
	if code, out := runVerify(t, "--pub", key+".pub", "--checkpoints", textLog, trail); code != 3 || !strings.Contains(out, "the log's checkpoints: 2 matched") {
		t.Fatalf("verify --checkpoints of a text log: %d %s", code, out)
	}
}

// TestAuditEvolvedKeyAcrossRestart pins issue 37 item 3 through the
// command: with --audit-key in a directory it can write, mrtr serve
// evolves the key every --audit-epoch (the key file replaced, the start
// log saying evolving), a restart loads the evolved key, and the whole
// trail verifies with the original FILE.pub. The same key file
// read-only signs without evolving, and start says so.
func TestAuditEvolvedKeyAcrossRestart(t *testing.T) {
	dir, keys := ringDir(t)
	kdir := filepath.Join(dir, "state")
	os.Mkdir(kdir, 0o700)
	key := filepath.Join(kdir, "audit.key")
	if code, out, errOut := runApp(t, "audit", "keygen", "--out", key); code != 0 || !strings.HasPrefix(out, key+".pub: ed25519:") {
		t.Fatalf("keygen: %d %s %s", code, out, errOut)
	}
	pub0, _ := os.ReadFile(key + ".pub")
	trail := filepath.Join(dir, "audit.jsonl")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--audit", trail, "--audit-key", key,
		"--audit-checkpoint", "50ms", "--audit-epoch", "100ms", "--node", "n1"}
	p := startChild(t, nil, args...)
	if l := p.waitLines(t, "mrtr audit signing key", 1)[0]; !strings.Contains(l, `"mode":"evolving"`) || !strings.Contains(l, strings.TrimSpace(string(pub0))) {
		t.Fatalf("start log: %s", l)
	}
	c := mcpClient{t, p.url}
	for !strings.Contains(p.logs.String(), `"next":{"epoch":2`) { // two epochs certified
		tok, _ := c.pause()
		c.complete(tok)
		p.pause(t, "to certify two epochs")
	}
	p.stop(t)
	p = startChild(t, nil, args...)
	if l := p.waitLines(t, "mrtr audit signing key", 1)[0]; !strings.Contains(l, `"mode":"evolving"`) || strings.Contains(l, `"epoch":0`) {
		t.Fatalf("the restart's start log: %s; want an evolved key", l)
	}
	c = mcpClient{t, p.url}
	tok, _ := c.pause()
	c.complete(tok)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if b, _ := os.ReadFile(key + ".pub"); !bytes.Equal(b, pub0) {
		t.Fatal("FILE.pub changed")
	}
	if code, out := runVerify(t, "--pub", key+".pub", "--checkpoints", saveLog(t, p, "log"), trail); code != 0 || !strings.Contains(out, "node n1: ") || !strings.Contains(out, " sealed; the final checkpoint: ") {
		t.Fatalf("verify with the original FILE.pub across epochs and a restart: %d %s", code, out)
	}
	// Another node's name: refused.
	if code, out := runVerify(t, "--pub", key+".pub", "--node", "n2", trail); code != 1 || !strings.Contains(out, "another node") {
		t.Fatalf("verify --node n2 of n1's trail: %d %s", code, out)
	}
	// Another key: refused.
	other := filepath.Join(dir, "other.key")
	runApp(t, "audit", "keygen", "--out", other)
	if code, out := runVerify(t, "--pub", other+".pub", trail); code != 1 || !strings.Contains(out, "bad signature") {
		t.Fatalf("verify under another key: %d %s", code, out)
	}
	// A key file mrtr cannot rewrite: static, and start says what that gives up.
	if os.Geteuid() != 0 {
		os.Chmod(kdir, 0o500)
		defer os.Chmod(kdir, 0o700)
		p = startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--audit", filepath.Join(dir, "static.jsonl"), "--audit-key", key)
		if l := p.waitLines(t, "mrtr audit signing key", 1)[0]; !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, `"mode":"static"`) || !strings.Contains(l, "never evolves") {
			t.Fatalf("start log of a read-only key: %s", l)
		}
		p.stop(t)
	}
}

// TestAuditNodesReportedEach pins issue 37 items 1 and 6 through the
// command: replicas sharing a ring and no --audit-key sign with the key
// derived from it (start logs it and what that mode gives up; mrtr audit
// pubkey prints it), each trail names its --node, verify of several
// nodes' trails reports each node, and one node's cut trail fails alone.
func TestAuditNodesReportedEach(t *testing.T) {
	dir, keys := ringDir(t)
	pub := ringPub(t, keys)
	pubText, _ := os.ReadFile(pub)
	var trails []string
	for _, n := range []string{"a", "b"} {
		trail := filepath.Join(dir, n+".jsonl")
		trails = append(trails, trail)
		p := startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--audit", trail, "--node", n)
		l := p.waitLines(t, "mrtr audit signing key", 1)[0]
		if !strings.Contains(l, `"mode":"ring-derived"`) || !strings.Contains(l, strings.TrimSpace(string(pubText))) || !strings.Contains(l, "every holder of the key ring") {
			t.Fatalf("start log: %s", l)
		}
		tok, _ := (mcpClient{t, p.url}).pause()
		(mcpClient{t, p.url}).complete(tok)
		p.stop(t)
	}
	code, out := runVerify(t, append([]string{"--pub", pub}, trails...)...)
	if code != 0 || !strings.Contains(out, "node a: 5 lines sealed") || !strings.Contains(out, "node b: 5 lines sealed") || !strings.Contains(out, "2 nodes") {
		t.Fatalf("verify of two nodes: %d %s", code, out)
	}
	b, _ := os.ReadFile(trails[1])
	os.WriteFile(trails[1], b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1], 0o600) // b's final checkpoint cut
	code, out = runVerify(t, append([]string{"--pub", pub}, trails...)...)
	if code != 3 || !strings.Contains(out, "node a: 5 lines sealed") || !strings.Contains(out, "node b: 4 lines hold, not sealed to the end: 3 lines after the newest checkpoint (1 at ") {
		t.Fatalf("verify of two nodes, b's tail cut: %d %s", code, out)
	}
}
