//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// TestAuditSIGHUPReopens pins issue 29 item 4 on a real `mrtr serve`
// process: after logrotate moves the trail, SIGHUP makes the process
// write to a new file at the same path, mode 0600, whose chain goes on
// from the moved one (mrtr audit verify accepts the two as one chain,
// and the new one alone only with --continued). A restart on the same
// file goes on with its chain too.
func TestAuditSIGHUPReopens(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	trail := filepath.Join(dir, "audit.jsonl")
	p := startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--audit", trail)
	c := mcpClient{t, p.url}
	tok, _ := c.pause()
	c.complete(tok)
	if got := events(readTrail(t, trail)); got != "paused,resumed,completed" {
		t.Fatalf("events %s", got)
	}
	// serve's own flow: neither the argument value (env "staging"), nor
	// the answer's content (approve), nor the token is in the trail.
	b, _ := os.ReadFile(trail)
	for _, secret := range []string{"staging", "approve", tok, tok[len(tok)-16:]} {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("the trail holds %q", secret)
		}
	}
	rotated := trail + ".1"
	if err := os.Rename(trail, rotated); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLines(t, "mrtr audit trail reopened on SIGHUP", 1)
	p.waitLines(t, "mrtr key ring unchanged", 1) // the key ring's own SIGHUP handling still runs
	c.complete(func() string { s, _ := c.pause(); return s }())
	if got := events(readTrail(t, rotated)); got != "paused,resumed,completed" {
		t.Fatalf("the moved file after SIGHUP: %s", got)
	}
	if got := events(readTrail(t, trail)); got != "paused,resumed,completed" {
		t.Fatalf("the new file: %s", got)
	}
	if fi, err := os.Stat(trail); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file mode %v %v", fi.Mode(), err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Each file: a checkpoint (the start's, the SIGHUP's) and three call
	// lines; the new one the final checkpoint too.
	if code, out := runVerify(t, "--keys", keys, rotated, trail); code != 0 || !strings.Contains(out, "9 lines in 2 files") {
		t.Fatalf("verify of both: %d %s", code, out)
	}
	if code, out := runVerify(t, "--keys", keys, trail); code != 1 || !strings.Contains(out, "line 1: broken link") {
		t.Fatalf("verify of the new file alone: %d %s", code, out)
	}
	if code, out := runVerify(t, "--keys", keys, "--continued", trail); code != 0 {
		t.Fatalf("verify --continued of the new file: %d %s", code, out)
	}

	// A restart appends to the same file and goes on with its chain.
	before, _ := os.ReadFile(trail)
	p = startChild(t, nil, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--keys", keys, "--audit", trail)
	c = mcpClient{t, p.url}
	c.pause()
	p.stop(t)
	after, _ := os.ReadFile(trail)
	if !bytes.HasPrefix(after, before) || len(after) == len(before) {
		t.Fatal("the restart did not append")
	}
	if code, out := runVerify(t, "--keys", keys, rotated, trail); code != 0 || !strings.Contains(out, "12 lines in 2 files") { // a checkpoint, a pause, the final checkpoint
		t.Fatalf("verify after a restart: %d %s", code, out)
	}
	pub := ringPub(t, keys)
	if code, out := runVerify(t, "--pub", pub, rotated, trail); code != 0 || !strings.Contains(out, "12 lines in 2 files sealed; the final checkpoint: 5 at ") {
		t.Fatalf("verify after a restart: %d %s", code, out)
	}
	// A line deleted: the next one's link is broken.
	ls := bytes.SplitAfter(after, []byte("\n"))
	cut := filepath.Join(dir, "cut.jsonl")
	os.WriteFile(cut, append(append([]byte{}, ls[0]...), bytes.Join(ls[2:], nil)...), 0o600)
	if code, out := runVerify(t, "--keys", keys, rotated, cut); code != 1 || !strings.Contains(out, "line 2: broken link") {
		t.Fatalf("verify of a trail with a line deleted: %d %s", code, out)
	}
	// The tail cut: truncated.
	os.WriteFile(cut, after[:len(after)-5], 0o600)
	if code, out := runVerify(t, "--keys", keys, "--continued", cut); code != 1 || !strings.Contains(out, "line 8: truncated") {
		t.Fatalf("verify of a truncated trail: %d %s", code, out)
	}
}

// TestAuditCutThenSIGHUPShows pins issue 35 item 5's and issue 37 item
// 4's SIGHUP case on a real `mrtr serve` (the outside review's
// TestRev3TruncateThenSIGHUPHidesDeletion): lines cut from the end of the
// live trail, then a SIGHUP (a key reload, logrotate): the process goes
// on with the chain it holds in memory (the same file), so the SIGHUP's
// checkpoint, the next line, is a broken link, with --pub as with
// --keys, instead of a trail that verifies with lines missing.
func TestAuditCutThenSIGHUPShows(t *testing.T) {
	n := startSealed(t)
	keys, key, trail, p, c := n.keys, n.key, n.trail, n.p, mcpClient{t, n.p.url}
	b, _ := os.ReadFile(trail)
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) != 11 { // the first checkpoint, 9 lines and the empty tail
		t.Fatalf("%d lines", len(ls)-1)
	}
	if err := os.Truncate(trail, int64(len(bytes.Join(ls[:8], nil)))); err != nil { // lines 9 and 10 deleted
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLines(t, "mrtr audit trail reopened on SIGHUP", 1)
	c.pause()
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if code, out := runVerify(t, "--pub", key+".pub", trail); code != 1 || !strings.Contains(out, trail+": line 9: broken link") {
		t.Fatalf("verify --pub of a trail cut before a SIGHUP: %d %s", code, out)
	}
	if code, out := runVerify(t, "--keys", keys, trail); code != 1 || !strings.Contains(out, "line 9: broken link (8 good lines before it)") {
		t.Fatalf("verify --keys of a trail cut before a SIGHUP: %d %s", code, out)
	}
}
