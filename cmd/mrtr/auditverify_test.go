package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/reqstate"
)

// writeTrail writes n completed lines to path under the ring in keys,
// going on from prev ("" starts a chain), and returns the link to the
// last one.
func writeTrail(t *testing.T, keys, path, prev string, n int) string {
	t.Helper()
	ring, err := reqstate.LoadKeyRing(keys)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := audit.NewWriter(f, prev, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	for i := range n {
		if err := w.Write(&audit.Line{Time: time.Date(2026, 12, 2, 7, 0, i, 0, time.UTC), Event: audit.EventCompleted, RequestID: strconv.Itoa(i), Outcome: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	return w.Prev()
}

// TestAuditVerifyChainsFiles pins mutation survivor audit.go:173 (now in
// internal/audit): the
// files after the first are checked as the chain's next links, not as
// --continued: a file that does not go on from the one before it is a
// broken link on its first line, and the message says which file it
// does not follow.
func TestAuditVerifyChainsFiles(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	old, cur, other := filepath.Join(dir, "audit.jsonl.1"), filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "other.jsonl")
	last := writeTrail(t, keys, old, "", 3)
	writeTrail(t, keys, cur, last, 2)
	writeTrail(t, keys, other, audit.LinkOf([]byte("a line of another trail")), 2)
	if code, out := runVerify(t, "--keys", keys, old, cur); code != 0 || !strings.Contains(out, "5 lines in 2 files, one chain") {
		t.Fatalf("verify of one chain: %d %s", code, out)
	}
	for _, second := range []string{other, old} {
		code, out := runVerify(t, "--keys", keys, old, second)
		if code != 1 || !strings.Contains(out, second+": line 1: broken link") || !strings.Contains(out, "does not go on from the end of "+old) {
			t.Fatalf("verify of %s after %s: %d %s", second, old, code, out)
		}
	}
}

// TestAuditVerifyWords pins issue 39 item 3: after a rotation the live
// file checked alone suggests the file before it or --continued;
// unknown key names the kid; a missing --keys or PATH is named; success
// prints the last line's time and event; one line is "1 line".
func TestAuditVerifyWords(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	old, cur := filepath.Join(dir, "audit.jsonl.1"), filepath.Join(dir, "audit.jsonl")
	last := writeTrail(t, keys, old, "", 1)
	writeTrail(t, keys, cur, last, 2)

	code, out := runVerify(t, "--keys", keys, old)
	if code != 0 || !strings.Contains(out, old+": 1 line, every MAC and link holds; the last line: completed at 2026-12-02T07:00:00Z") {
		t.Fatalf("verify of one line: %d %s", code, out)
	}
	code, out = runVerify(t, "--keys", keys, cur)
	if code != 1 || !strings.Contains(out, "line 1: broken link (0 good lines before it)") ||
		!strings.Contains(out, "--continued") || !strings.Contains(out, cur+".1 "+cur) {
		t.Fatalf("verify of the live file alone after a rotation: %d %s; want a hint to the file before it and --continued", code, out)
	}
	if code, out = runVerify(t, "--keys", keys, "--continued", cur); code != 0 || !strings.Contains(out, "2 lines,") || !strings.Contains(out, "completed at 2026-12-02T07:00:01Z") {
		t.Fatalf("verify --continued: %d %s", code, out)
	}

	otherKeys := filepath.Join(dir, "other.json")
	testcmd.WriteRing(t, otherKeys, testcmd.GenKey(t, "k2"))
	if code, out = runVerify(t, "--keys", otherKeys, old); code != 1 || !strings.Contains(out, `line 1: unknown key "k1"`) {
		t.Fatalf("verify under a ring without the kid: %d %s", code, out)
	}
	if code, out = runVerify(t, old); code != 2 || !strings.Contains(out, "--keys RING is missing") {
		t.Fatalf("verify without --keys: %d %s", code, out)
	}
	if code, out = runVerify(t, "--keys", keys); code != 2 || !strings.Contains(out, "no PATH") {
		t.Fatalf("verify without a path: %d %s", code, out)
	}
}

// TestAuditVerifyTorn pins issue 35 item 10 on the command: a torn line
// is named and the lines after it are checked; one altered after it is
// named; either way the exit status is 1.
func TestAuditVerifyTorn(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	path := filepath.Join(dir, "audit.jsonl")
	ring, _ := reqstate.LoadKeyRing(keys)
	w, err := audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"})
	}
	w.Close()
	b, _ := os.ReadFile(path)
	os.Truncate(path, int64(len(b)-30)) // a crash inside line 3
	if w, err = audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"})
	}
	w.Close()
	code, out := runVerify(t, "--keys", keys, path)
	if code != 1 || !strings.Contains(out, "5 lines hold; line 3: truncated (torn:") || !strings.Contains(out, "torn lines: "+path+" line 3") {
		t.Fatalf("verify of a trail with a torn line: %d %s", code, out)
	}
	b, _ = os.ReadFile(path)
	i := bytes.LastIndex(b, []byte(`"complete"`))
	b[i+1] = 'C' // line 6
	os.WriteFile(path, b, 0o600)
	if code, out = runVerify(t, "--keys", keys, path); code != 1 || !strings.Contains(out, "line 6: altered (4 good lines before it; torn before it: line 3)") {
		t.Fatalf("verify of a trail altered after a torn line: %d %s", code, out)
	}
}

// TestAuditRequiredNeedsAudit pins the hang of mutation survivor
// audit.go:34 (now internal/node/audit.go): --audit-required without --audit is a usage error (exit
// 2, naming --audit), for serve and proxy; a command that starts serving
// instead fails the test within its bound, saying so.
func TestAuditRequiredNeedsAudit(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--audit-required"},
		{"proxy", "--addr", "127.0.0.1:0", "--audit-required", "--upstream", "http://" + testcmd.FreeAddr(t) + "/mcp"},
	} {
		code, _, stderr, ended, _ := testcmd.RunFor(15*time.Second, run, func(string) string { return "" }, args...)
		if !ended {
			t.Fatalf("mrtr %s: still running after 15s; waited for it to exit 2, a usage error naming --audit", strings.Join(args, " "))
		}
		if code != 2 || !strings.Contains(stderr, "--audit PATH") {
			t.Fatalf("mrtr %s: exit %d: %s; want 2 and --audit PATH named", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestAuditHelpOneForm pins issue 39 item 8's audit part: mrtr audit
// --help and mrtr audit verify --help print the same text, flags
// included, and name the trail audit.jsonl as the docs do.
func TestAuditHelpOneForm(t *testing.T) {
	_, a, _ := runApp(t, "audit", "--help")
	_, v, _ := runApp(t, "audit", "verify", "--help")
	if a != v || !strings.Contains(a, "\n  --keys FILE\n") || !strings.Contains(a, "audit.jsonl.1\naudit.jsonl") || strings.Contains(a, "audit.log") {
		t.Fatalf("mrtr audit --help:\n%s\nmrtr audit verify --help:\n%s", a, v)
	}
}

// TestUpstreamURLShown pins issue 35 item 9 and mutation survivor
// audit.go:48 (now internal/proxy/audit.go): the upstream URL's userinfo,
// query and fragment, where a credential rides (?api_key=...), reach
// neither the audit trail nor the log; the trail and the log name scheme,
// host and path.
func TestUpstreamURLShown(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	upstream, _ := startServe(t, "--keys", keys)
	const secret = "zq-query-secret"
	withSecret := strings.Replace(upstream, "http://", "http://user:zq-pw@", 1) + "?api_key=" + secret + "#zq-frag"
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	url, logs := startProxyCmd(t, "--keys", keys, "--audit", trail, "--upstream", withSecret)
	tok, answers := pauseCall(t, url, "deploy", map[string]any{"service": "s", "env": "staging"}, nil, map[string]any{"approve": true})
	testcmd.RPCPost(t, url, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{"service": "s", "env": "staging"}, "requestState": tok, "inputResponses": answers})
	ls := readTrail(t, trail)[1:] // after the first checkpoint
	if len(ls) == 0 || ls[0].Upstream != upstream {
		t.Fatalf("the trail names the upstream %q, want %q", ls[0].Upstream, upstream)
	}
	// An upstream that is not there: the start's warning and the calls'
	// errors name it too.
	down := "http://user:zq-pw@" + testcmd.FreeAddr(t) + "/mcp?api_key=" + secret + "#zq-frag"
	durl, dlogs := startProxyCmd(t, "--keys", keys, "--upstream", down, "--upstream-era", "modern")
	testcmd.RPCPost(t, durl, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{}})
	_, alogs := startProxyCmd(t, "--keys", keys, "--upstream", down) // era auto: judged when it answers (internal/proxy/lateera.go)
	b, _ := os.ReadFile(trail)
	for name, text := range map[string]string{"the trail": string(b), "the log": logs.String(), "the log of a proxy of an upstream down": dlogs.String(),
		"the log of a proxy waiting for its upstream's era": alogs.String()} {
		for _, s := range []string{secret, "zq-pw", "zq-frag", "user@", "user:"} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q:\n%s", name, s, text)
			}
		}
	}
	if !strings.Contains(dlogs.String(), strings.TrimSuffix(strings.Replace(down, "user:zq-pw@", "", 1), "?api_key="+secret+"#zq-frag")) {
		t.Errorf("the log of a proxy of an upstream down does not name it:\n%s", dlogs.String())
	}
}

// ringDir returns a new directory and the path of a key ring (key k1)
// written in it.
func ringDir(t *testing.T) (dir, keys string) {
	t.Helper()
	dir = t.TempDir()
	keys = filepath.Join(dir, "keys.json")
	testcmd.WriteRing(t, keys, testcmd.GenKey(t, "k1"))
	return dir, keys
}

// TestAuditCheckpointTextLog pins issue 37 item 2 with --log-format
// text: each checkpoint record (the start's and the clean stop's final
// one) holds the checkpoint's JSON as a quoted string, which verify
// --checkpoints reads back.
func TestAuditCheckpointTextLog(t *testing.T) {
	dir, keys := ringDir(t)
	trail, key := filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "audit.key")
	// Stopped (its context cancelled: a clean stop) after a second.
	_, _, logs, _, stopped := testcmd.RunFor(time.Second, run, nil, "serve", "--addr", "127.0.0.1:0", "--log-format", "text", "--keys", keys,
		"--audit", trail, "--audit-key", key, "--node", "t1")
	if !stopped || !strings.Contains(logs, `msg="mrtr audit checkpoint" checkpoint="{\"node\":\"t1\",\"seq\":1,`) {
		t.Fatalf("stopped %v; no checkpoint record in the text log:\n%s", stopped, logs)
	}
	log := filepath.Join(dir, "mrtr.log")
	os.WriteFile(log, []byte(logs), 0o600)
	if code, out := runVerify(t, "--pub", key+".pub", "--checkpoints", log, trail); code != 0 || !strings.Contains(out, "node t1: 2 lines sealed; the final checkpoint: 2 at ") ||
		!strings.Contains(out, "the log's checkpoints: 2 matched") {
		t.Fatalf("verify --checkpoints of a text log: %d %s", code, out)
	}
}

// TestAuditKeygenPubkey pins issue 37 item 1's commands: mrtr audit
// keygen --out FILE writes the key (0600) and FILE.pub, prints the
// public key, and never overwrites either; mrtr audit pubkey --keys RING
// [--kid KID] prints the ring-derived public key (what a node without
// --audit-key signs with); a missing flag or a stray argument is usage.
func TestAuditKeygenPubkey(t *testing.T) {
	dir, keys := ringDir(t)
	key := filepath.Join(dir, "audit.key")
	code, out, _ := runApp(t, "audit", "keygen", "--out", key)
	pub, _ := os.ReadFile(key + ".pub")
	if fi, err := os.Stat(key); code != 0 || err != nil || fi.Mode().Perm() != 0o600 || out != key+".pub: "+string(pub) {
		t.Fatalf("keygen: %d %q, pub %q, %v", code, out, pub, err)
	}
	if _, err := audit.LoadSigner(key); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(key)
	if code, _, errOut := runApp(t, "audit", "keygen", "--out", key); code != 1 || !strings.Contains(errOut, "never overwrites") {
		t.Fatalf("keygen over a key: %d %s", code, errOut)
	}
	os.Remove(key)
	if code, _, errOut := runApp(t, "audit", "keygen", "--out", key); code != 1 || !strings.Contains(errOut, key+".pub exists") {
		t.Fatalf("keygen over a FILE.pub: %d %s", code, errOut)
	}
	os.WriteFile(key, before, 0o600)
	ring, _ := reqstate.LoadKeyRing(keys)
	want, _ := audit.RingPublicKey(ring, "")
	if code, out, _ := runApp(t, "audit", "pubkey", "--keys", keys); code != 0 || out != want.String()+"\n" {
		t.Fatalf("pubkey: %d %q, want %s", code, out, want)
	}
	if code, out, _ := runApp(t, "audit", "pubkey", "--keys", keys, "--kid", "k1"); code != 0 || out != want.String()+"\n" {
		t.Fatalf("pubkey --kid k1: %d %q", code, out)
	}
	if code, _, errOut := runApp(t, "audit", "pubkey", "--keys", keys, "--kid", "nope"); code != 1 || !strings.Contains(errOut, `no key "nope"`) {
		t.Fatalf("pubkey --kid nope: %d %s", code, errOut)
	}
	for _, args := range [][]string{{"keygen"}, {"keygen", "--out", key, "x"}, {"pubkey"}, {"pubkey", "--keys", keys, "x"}, {"show"}} {
		if code, _, _ := runApp(t, append([]string{"audit"}, args...)...); code != 2 {
			t.Errorf("mrtr audit %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
	// verify: --pub and --keys together, or --checkpoints with --keys: usage.
	for _, args := range [][]string{{"--pub", key + ".pub", "--keys", keys, "t"}, {"--keys", keys, "--checkpoints", "l", "t"}, {"--pub", key + ".pub"}} {
		if code, out := runVerify(t, args...); code != 2 {
			t.Errorf("mrtr audit verify %s: exit %d, want 2: %s", strings.Join(args, " "), code, out)
		}
	}
}
