package audit_test

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

// clock is a settable clock for a Writer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond) // every reading a little later
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// node is a node's key file and the options of its Writers.
type node struct {
	t        *testing.T
	dir, key string
	pub      audit.PublicKey
	ring     *reqstate.KeyRing
	clk      *clock
	name     string
	logs     bytes.Buffer // the checkpoints, as slog's JSONHandler logs them
}

func newNode(t *testing.T, name string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), ring: testRing(t), clk: newClock(), name: name}
	n.key = filepath.Join(n.dir, "audit.key")
	pub, err := audit.GenerateKeyFile(n.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.pub = pub
	return n
}

func (n *node) signer() *audit.Signer {
	n.t.Helper()
	s, err := audit.LoadSigner(n.key)
	if err != nil {
		n.t.Fatal(err)
	}
	return s
}

func (n *node) opts(s *audit.Signer) *audit.Options {
	log := slog.New(slog.NewJSONHandler(&n.logs, nil))
	return &audit.Options{Keys: func() *reqstate.KeyRing { return n.ring }, Node: n.name, Signer: s,
		CheckpointInterval: -1, Now: n.clk.Now,
		OnCheckpoint: func(cp audit.Checkpoint) { log.Info("mrtr audit checkpoint", audit.CheckpointLogKey, cp) }}
}

func (n *node) open(path string) *audit.Writer {
	n.t.Helper()
	w, err := audit.OpenFile(path, n.opts(n.signer()))
	if err != nil {
		n.t.Fatal(err)
	}
	return w
}

func (n *node) checkpoints() []audit.Checkpoint {
	n.t.Helper()
	cps, err := audit.ReadCheckpoints(bytes.NewReader(n.logs.Bytes()))
	if err != nil {
		n.t.Fatal(err)
	}
	return cps
}

// sealed verifies the files at paths as one chain.
func sealed(t *testing.T, pub audit.PublicKey, opts *audit.SealOptions, paths ...string) audit.SealResult {
	t.Helper()
	var rs []io.Reader
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, bytes.NewReader(b))
	}
	res, err := audit.VerifySealed(pub, rs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantVerdict(t *testing.T, res audit.SealResult, v audit.Verdict, p audit.Problem) {
	t.Helper()
	if res.Verdict != v || (p != "" && (res.Err == nil || res.Err.Problem != p)) {
		t.Fatalf("VerifySealed: %v, err %v (%+v); want %v %s", res.Verdict, res.Err, res, v, p)
	}
}

// wantBadLine is wantVerdict for a broken trail, and the bad line's
// number in its file.
func wantBadLine(t *testing.T, res audit.SealResult, p audit.Problem, line int) {
	t.Helper()
	wantVerdict(t, res, audit.VerdictBroken, p)
	if res.Err.Pos.Line != line {
		t.Fatalf("bad line %v, want line %d", res.Err, line)
	}
}

// write opens a Writer on path, writes k lines and closes it (final).
func (n *node) write(path string, k int) {
	n.t.Helper()
	w := n.open(path)
	writeN(n.t, w, k)
	if err := w.Close(); err != nil {
		n.t.Fatal(err)
	}
}

// fileLines returns the lines of the file at path, each with its newline.
func fileLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(b)
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// TestSealedTrail pins issue 37 items 2 and 5: a trail written with a
// node key verifies with FILE.pub alone, ends in a final checkpoint,
// and still verifies with the ring as in round one; the checkpoints the
// hook logged read back and match.
func TestSealedTrail(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 5)
	if err := w.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pub, err := audit.ReadPublicKey(n.key + ".pub")
	if err != nil || pub != n.pub {
		t.Fatalf("FILE.pub: %v, %v", pub, err)
	}
	res := sealed(t, pub, &audit.SealOptions{Node: "n1", Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.Lines != 11 || res.Last == nil || !res.Last.Final || res.Last.Seq != 3 || res.Last.Count != 10 || res.LogMatched != 3 {
		t.Fatalf("result %+v, last %+v", res, res.Last)
	}
	b, _ := os.ReadFile(path)
	if r, err := audit.Verify(bytes.NewReader(b), n.ring, nil); err != nil || r.Lines != 11 {
		t.Fatalf("round-one Verify of a sealed trail: %+v, %v", r, err)
	}
	st, _ := os.Stat(n.key)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode())
	}
}

// TestSealedCutThenReopenShows pins issue 37 item 4 (the outside
// review's TestRev3TruncateThenSIGHUPHidesDeletion): lines 8-10 of 10
// cut, a SIGHUP, two more lines: the link after the cut is broken.
func TestSealedCutThenReopenShows(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 10)
	ls := fileLines(t, path) // the first checkpoint and 10 lines
	if err := os.Truncate(path, int64(len(join(ls[:8])))); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 2)
	w.Close()
	wantBadLine(t, sealed(t, n.pub, nil, path), audit.ProblemBrokenLink, 9) // the line after the cut
}

// TestSealedCutThenRestartShows pins issue 37 item 4: lines cut from the
// end of a trail, then a restart (a new Writer on the file): the Writer
// goes on from the file's last checkpoint, not its last line, so the
// lines after it are abandoned by a signed restart record (the verdict
// is never OK), and the checkpoints the log carried off the host show
// the cut (broken).
func TestSealedCutThenRestartShows(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 10)
	w.Checkpoint() // seals the 10 lines, and the log has it
	w.Close()      // final
	ls := fileLines(t, path)
	if len(ls) != 13 {
		t.Fatalf("%d lines, want 13", len(ls))
	}
	// Lines 8-10, the checkpoint and the final one cut.
	if err := os.Truncate(path, int64(len(join(ls[:8])))); err != nil {
		t.Fatal(err)
	}
	n.write(path, 2)
	res := sealed(t, n.pub, nil, path)
	if res.Verdict == audit.VerdictOK || res.Abandoned != 7 || res.Restarts != 1 {
		t.Fatalf("cut then restart, no log: %+v; want abandoned 7 lines, not OK", res)
	}
	res = sealed(t, n.pub, &audit.SealOptions{Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictBroken, audit.ProblemFork)
}

// TestSealedCutShowsWithLog: a trail cut after a checkpoint the log
// carried off the host, with no restart after, ends before it (broken);
// without the log, the cut tail cannot be seen, and the verdict says
// the trail does not end in a final checkpoint.
func TestSealedCutShowsWithLog(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	n.write(path, 4)
	ls := fileLines(t, path)
	os.WriteFile(path, join(ls[:len(ls)-1]), 0o600) // the final checkpoint cut
	res := sealed(t, n.pub, nil, path)
	wantVerdict(t, res, audit.VerdictUnsealed, "")
	res = sealed(t, n.pub, &audit.SealOptions{Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictBroken, audit.ProblemEndsEarly)
}

// TestSealedCrashAbandons: a crash (no Close) leaves lines after the
// last checkpoint; the restart abandons them by a signed record, and the
// verdict says how many (unsealed, not broken).
func TestSealedCrashAbandons(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 3)
	w.Checkpoint()
	writeN(t, w, 2) // then the process dies
	w2 := n.open(path)
	writeN(t, w2, 1)
	w2.Close()
	res := sealed(t, n.pub, &audit.SealOptions{Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictUnsealed, "")
	if res.Abandoned != 2 || res.Restarts != 1 || res.Unsealed != 0 || !res.Last.Final {
		t.Fatalf("%+v", res)
	}
}

// TestSealedEvolvedKeyAcrossRestart pins issue 37 item 3: the key
// evolves each epoch, the key file keeps the chain of certifications,
// and a trail written across epochs and a restart verifies with the
// original FILE.pub; a new trail begun with the evolved key opens with
// the certifications and verifies too.
func TestSealedEvolvedKeyAcrossRestart(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	s := n.signer()
	if s.Mode() != audit.KeyEvolving || s.Epoch() != 0 {
		t.Fatalf("mode %v epoch %d", s.Mode(), s.Epoch())
	}
	w, err := audit.OpenFile(path, n.opts(s))
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 2)
	n.clk.Add(16 * time.Minute)
	w.Checkpoint() // certifies epoch 1
	writeN(t, w, 2)
	n.clk.Add(16 * time.Minute)
	w.Checkpoint() // certifies epoch 2
	writeN(t, w, 1)
	w.Close()
	if s.Epoch() != 2 {
		t.Fatalf("epoch %d after two epochs", s.Epoch())
	}
	// A restart reads the evolved key file.
	s2 := n.signer()
	if s2.Epoch() != 2 || s2.PublicKey() != n.pub {
		t.Fatalf("reloaded: epoch %d, pub %v want %v", s2.Epoch(), s2.PublicKey(), n.pub)
	}
	w, err = audit.OpenFile(path, n.opts(s2))
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 2)
	w.Close()
	res := sealed(t, n.pub, &audit.SealOptions{Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.Last.Epoch != 2 {
		t.Fatalf("last epoch %d", res.Last.Epoch)
	}
	// A new trail, begun in epoch 2.
	other := filepath.Join(n.dir, "new.jsonl")
	n.write(other, 1)
	res = sealed(t, n.pub, nil, other)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.FirstEpoch != 2 {
		t.Fatalf("first epoch %d, want 2", res.FirstEpoch)
	}
}

// TestSealedKeyBehind: a key file replaced by an older copy (a Secret
// re-seeded at restart) cannot go on with a trail a later epoch signed.
func TestSealedKeyBehind(t *testing.T) {
	n := newNode(t, "n1")
	old, _ := os.ReadFile(n.key)
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	n.clk.Add(16 * time.Minute)
	w.Checkpoint()
	w.Close()
	os.WriteFile(n.key, old, 0o600)
	if _, err := audit.OpenFile(path, n.opts(n.signer())); err == nil || !bytesContains(err.Error(), "earlier epoch") {
		t.Fatalf("OpenFile with a key behind the trail: %v", err)
	}
}

func bytesContains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

// TestSealedStaticKey: a key file in a directory that cannot be written
// signs without evolving, says so, and the trail verifies.
func TestSealedStaticKey(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes a read-only directory")
	}
	n := newNode(t, "n1")
	if err := os.Chmod(n.dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(n.dir, 0o700) })
	s := n.signer()
	if s.Mode() != audit.KeyStatic || s.WhyStatic() == "" || audit.KeyStatic.GivesUp() == "" {
		t.Fatalf("mode %v (%s)", s.Mode(), s.WhyStatic())
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.OpenFile(path, n.opts(s))
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 1)
	n.clk.Add(time.Hour)
	w.Checkpoint()
	w.Close()
	if s.Epoch() != 0 {
		t.Fatalf("a static key evolved to epoch %d", s.Epoch())
	}
	wantVerdict(t, sealed(t, n.pub, nil, path), audit.VerdictOK, "")
}

// TestSealedOtherNode pins issue 37 item 5: another node's trail, or one
// under another key, is refused.
func TestSealedOtherNode(t *testing.T) {
	n1, n2 := newNode(t, "n1"), newNode(t, "n2")
	p1, p2 := filepath.Join(n1.dir, "audit.jsonl"), filepath.Join(n2.dir, "audit.jsonl")
	n1.write(p1, 2)
	n2.write(p2, 2)
	wantVerdict(t, sealed(t, n1.pub, &audit.SealOptions{Node: "n1"}, p1), audit.VerdictOK, "")
	wantVerdict(t, sealed(t, n1.pub, &audit.SealOptions{Node: "n1"}, p2), audit.VerdictBroken, audit.ProblemNode)
	wantVerdict(t, sealed(t, n1.pub, nil, p2), audit.VerdictBroken, audit.ProblemSignature)
}

// TestSealedReplicas pins issue 37 item 6: replicas sharing a ring
// derive one public key (RingSigner); each node's trail verifies on its
// own, named by its node, and not as another's.
func TestSealedReplicas(t *testing.T) {
	ring := testRing(t)
	pub, err := audit.RingPublicKey(ring, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"a", "b"} {
		s, err := audit.RingSigner(ring, "")
		if err != nil || s.Mode() != audit.KeyRingDerived || s.PublicKey() != pub {
			t.Fatalf("RingSigner: %v %v", s, err)
		}
		p := filepath.Join(dir, name+".jsonl")
		w, err := audit.OpenFile(p, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, Node: name, Signer: s, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		writeN(t, w, 3)
		w.Close()
		paths = append(paths, p)
	}
	for i, name := range []string{"a", "b"} {
		b, _ := os.ReadFile(paths[i])
		if got, err := audit.TrailNode(bytes.NewReader(b)); err != nil || got != name {
			t.Fatalf("TrailNode: %q, %v; want %q", got, err, name)
		}
	}
	wantVerdict(t, sealed(t, pub, &audit.SealOptions{Node: "a"}, paths[0]), audit.VerdictOK, "")
	wantVerdict(t, sealed(t, pub, &audit.SealOptions{Node: "b"}, paths[1]), audit.VerdictOK, "")
	wantVerdict(t, sealed(t, pub, &audit.SealOptions{Node: "a"}, paths[1]), audit.VerdictBroken, audit.ProblemNode)
	// Two nodes' files are not one chain.
	wantVerdict(t, sealed(t, pub, nil, paths...), audit.VerdictBroken, "")
}

// TestSealedRotation: two files after logrotate verify as one chain,
// oldest first; the newer alone does not begin the chain, and the files
// in the wrong order are refused.
func TestSealedRotation(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 3)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 2)
	w.Close()
	res := sealed(t, n.pub, nil, path+".1", path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.Lines != 8 {
		t.Fatalf("%d lines, want 8", res.Lines)
	}
	wantVerdict(t, sealed(t, n.pub, nil, path), audit.VerdictBroken, audit.ProblemNotStart)
	wantVerdict(t, sealed(t, n.pub, nil, path, path+".1"), audit.VerdictBroken, "")
	// The newer file alone, its predecessor gone: the log anchors it.
	log := n.checkpoints()
	res = sealed(t, n.pub, &audit.SealOptions{Continued: true, Checkpoints: log}, path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.Lines != 4 || res.LogMatched != 2 {
		t.Fatalf("%+v", res)
	}
	wantVerdict(t, sealed(t, n.pub, &audit.SealOptions{Continued: true}, path), audit.VerdictBroken, audit.ProblemNotStart)
	wantVerdict(t, sealed(t, n.pub, &audit.SealOptions{Continued: true, Checkpoints: log[1:]}, path), audit.VerdictBroken, audit.ProblemNotStart)
	// A line of it altered. (Lines cut from its start, before its first
	// checkpoint, cannot be told from lines in the file before it.)
	ls := fileLines(t, path)
	ls[1] = bytes.Replace(ls[1], []byte(`"request_id":"0"`), []byte(`"request_id":"5"`), 1)
	os.WriteFile(path, join(ls), 0o600)
	wantBadLine(t, sealed(t, n.pub, &audit.SealOptions{Continued: true, Checkpoints: log}, path), audit.ProblemBrokenLink, 3)
}

// TestSealedTornLineInTheMiddle pins issue 37 item 5: a torn line (a
// crash mid-write) is named, the lines after it are checked, and the
// verdict is unsealed; an altered line after it is still found.
func TestSealedTornLineInTheMiddle(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	w := n.open(path)
	writeN(t, w, 3)
	b, _ := os.ReadFile(path)
	os.Truncate(path, int64(len(b)-30)) // the process dies inside line 4
	n.write(path, 3)
	res := sealed(t, n.pub, nil, path)
	wantVerdict(t, res, audit.VerdictUnsealed, "")
	if len(res.Torn) != 1 || res.Torn[0].Line != 4 || res.Lines != 9 {
		t.Fatalf("%+v", res)
	}
	ls := fileLines(t, path)
	ls[6] = bytes.Replace(ls[6], []byte(`"request_id":"1"`), []byte(`"request_id":"9"`), 1)
	os.WriteFile(path, join(ls), 0o600)
	wantBadLine(t, sealed(t, n.pub, nil, path), audit.ProblemBrokenLink, 8) // the one after the altered line 7
}

// TestSealedAlterations: an altered, deleted, inserted or reordered line
// sealed by a checkpoint is named.
func TestSealedAlterations(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	n.write(path, 4)
	good := fileLines(t, path)
	for _, c := range []struct {
		name string
		edit func([][]byte) [][]byte
		line int
	}{
		{"altered last sealed line", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"request_id":"3"`), []byte(`"request_id":"8"`), 1)
			return ls
		}, 6},
		{"deleted", func(ls [][]byte) [][]byte { return append(ls[:2], ls[3:]...) }, 3},
		{"inserted", func(ls [][]byte) [][]byte { return append(ls[:3], append([][]byte{ls[2]}, ls[3:]...)...) }, 4},
		{"reordered", func(ls [][]byte) [][]byte { ls[2], ls[3] = ls[3], ls[2]; return ls }, 3},
		{"re-encoded checkpoint", func(ls [][]byte) [][]byte {
			ls[5] = bytes.Replace(ls[5], []byte(`{"node":"n1"`), []byte(`{"node": "n1"`), 1)
			return ls
		}, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			ls := make([][]byte, len(good))
			for i := range good {
				ls[i] = bytes.Clone(good[i])
			}
			os.WriteFile(path, join(c.edit(ls)), 0o600)
			res := sealed(t, n.pub, nil, path)
			if res.Verdict != audit.VerdictBroken || res.Err.Pos.Line != c.line {
				t.Fatalf("%+v (%v), want broken at line %d", res, res.Err, c.line)
			}
		})
	}
}

// TestReadCheckpointsGroups: a checkpoint logged inside a group, or
// among other records, reads back.
func TestReadCheckpointsGroups(t *testing.T) {
	n := newNode(t, "n1")
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil)).WithGroup("audit")
	o := n.opts(n.signer())
	o.OnCheckpoint = func(cp audit.Checkpoint) { log.Info("x", audit.CheckpointLogKey, cp); log.Info("other", "n", 1) }
	w, err := audit.OpenFile(filepath.Join(n.dir, "a.jsonl"), o)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	logs.WriteString("not json\n{\"checkpoint\":{\"seq\":\"x\"}}\n")
	cps, err := audit.ReadCheckpoints(&logs)
	if err != nil || len(cps) != 2 || cps[0].Seq != 1 || !cps[1].Final || cps[0].Node != "n1" {
		t.Fatalf("ReadCheckpoints: %+v, %v", cps, err)
	}
}

// TestSealedLogRecords: a log record that is not validly signed is
// ignored and counted, whatever it claims; a trail deleted and begun
// again by its node is caught by the log (two checkpoints for one
// sequence).
func TestSealedLogRecords(t *testing.T) {
	n := newNode(t, "n1")
	path := filepath.Join(n.dir, "audit.jsonl")
	n.write(path, 2)
	cps := n.checkpoints()
	forged := cps[len(cps)-1]
	forged.Count, forged.Seq = 99, forged.Seq+1 // after the trail's end, not signed
	forged2 := cps[0]
	forged2.Time = forged2.Time.Add(time.Second) // the first, altered
	res := sealed(t, n.pub, &audit.SealOptions{Checkpoints: append(cps, forged, forged2)}, path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.LogIgnored != 2 || res.LogMatched != len(cps) {
		t.Fatalf("%+v", res)
	}
	// The trail deleted, and begun again.
	os.Remove(path)
	n.write(path, 1)
	res = sealed(t, n.pub, &audit.SealOptions{Checkpoints: n.checkpoints()}, path)
	wantVerdict(t, res, audit.VerdictBroken, audit.ProblemFork)
	wantVerdict(t, sealed(t, n.pub, nil, path), audit.VerdictOK, "")
}

// TestCheckpointTimer pins issue 37 item 2: a line waits at most
// CheckpointInterval for the checkpoint that seals it; an idle Writer
// writes none until its epoch ends, when it writes the one that
// certifies the next key; each is handed to OnCheckpoint.
func TestCheckpointTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, "n1")
		path := filepath.Join(n.dir, "audit.jsonl")
		var mu sync.Mutex
		var cps []audit.Checkpoint
		got := func() []audit.Checkpoint {
			mu.Lock()
			defer mu.Unlock()
			return append([]audit.Checkpoint(nil), cps...)
		}
		o := n.opts(n.signer())
		o.Now, o.CheckpointInterval, o.Epoch = nil, 10*time.Second, 15*time.Minute
		o.OnCheckpoint = func(cp audit.Checkpoint) { mu.Lock(); cps = append(cps, cp); mu.Unlock() }
		w, err := audit.OpenFile(path, o)
		if err != nil {
			t.Fatal(err)
		}
		writeN(t, w, 2)
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if g := got(); len(g) != 2 || g[1].Count != 3 {
			t.Fatalf("checkpoints after an interval: %+v", g)
		}
		time.Sleep(time.Minute) // idle: nothing to seal
		synctest.Wait()
		if g := got(); len(g) != 2 {
			t.Fatalf("an idle Writer wrote %d checkpoints", len(g)-2)
		}
		time.Sleep(15 * time.Minute) // the epoch ends
		synctest.Wait()
		if g := got(); len(g) != 3 || g[2].Next == nil || g[2].Next.Epoch != 1 {
			t.Fatalf("no checkpoint certifying epoch 1 at the epoch's end: %+v", g)
		}
		writeN(t, w, 1)
		w.Close()
		g := got()
		if len(g) != 4 || !g[3].Final || g[3].Epoch != 1 {
			t.Fatalf("final: %+v", g)
		}
		res := sealed(t, n.pub, &audit.SealOptions{Checkpoints: g}, path)
		wantVerdict(t, res, audit.VerdictOK, "")
	})
}

// TestNoCheckpointWithoutSigner: a Writer without a Signer writes the
// round-one trail, and refuses a checkpoint line from its caller.
func TestNoCheckpointWithoutSigner(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	if err := w.Checkpoint(); err != nil || buf.Len() != 0 {
		t.Fatalf("Checkpoint without a Signer: %v, %q", err, buf.String())
	}
	if err := w.Write(&audit.Line{Event: audit.EventCheckpoint}); err == nil {
		t.Fatal("Write accepted a checkpoint line")
	}
}

// sealedFuzzTrail writes, the same way in every fuzz worker (a fixed key
// and clock), a sealed trail holding every line kind: checkpoints, one
// certifying the next epoch's key, abandoned lines and a restart record,
// a torn line, and a final checkpoint.
func sealedFuzzTrail(f *testing.F) (trails [][]byte, pub audit.PublicKey) {
	var err error
	ring := fuzzRing(f)
	dir := f.TempDir()
	keyPath := filepath.Join(dir, "audit.key")
	if pub, err = audit.GenerateKeyFile(keyPath, bytes.NewReader(bytes.Repeat([]byte{7}, 32))); err != nil {
		f.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); at = at.Add(time.Second); return at }
	later := func() { mu.Lock(); at = at.Add(2 * time.Minute); mu.Unlock() }
	path := filepath.Join(dir, "audit.jsonl")
	open := func(path string) *audit.Writer {
		s, err := audit.LoadSigner(keyPath)
		if err != nil {
			f.Fatal(err)
		}
		w, err := audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, Node: "n1",
			Signer: s, CheckpointInterval: -1, Epoch: time.Minute, Now: now})
		if err != nil {
			f.Fatal(err)
		}
		return w
	}
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		trails = append(trails, b)
	}
	w := open(path)
	w.Write(&audit.Line{Event: audit.EventPaused, Flow: "f1", Round: 1, Inputs: []audit.Input{{Key: "a"}}})
	later()
	w.Checkpoint() // certifies epoch 1
	w.Write(&audit.Line{Event: audit.EventResumed, Flow: "f1", Round: 1, Answers: []audit.Answer{{Key: "a", Action: "accept"}}})
	b, _ := os.ReadFile(path)
	os.Truncate(path, int64(len(b)-20)) // a crash inside the last line
	w = open(path)                      // a restart abandons it
	w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"})
	w.Write(&audit.Line{Event: audit.EventTaskCompleted, Task: taskDigest, Round: 1, Method: "tools/call", Outcome: "tool_error"})
	later()
	w.Checkpoint() // certifies epoch 2
	w.Close()
	read(path)
	// A trail begun in epoch 2 opens with a certs line, one a line.
	defer audit.SetCertsPerLine(1)()
	begun := filepath.Join(dir, "begun.jsonl")
	w = open(begun)
	w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"})
	w.Close()
	read(begun)
	return trails, pub
}

// TestSealedRingRotation pins the ring-derived mode across a rotation: a
// restart under a ring whose primary changed has the old kid's key
// certify the new one, so the trail verifies with the public key pinned
// at its start; once the old kid is gone from the ring, a restart can no
// longer certify, and verify refuses it.
func TestSealedRingRotation(t *testing.T) {
	k1, _ := reqstate.GenerateKey("k1", nil)
	k2, _ := reqstate.GenerateKey("k2", nil)
	k3, _ := reqstate.GenerateKey("k3", nil)
	ring1, _ := reqstate.NewKeyRing(k1)
	ring2, _ := reqstate.NewKeyRing(k2, k1)
	ring3, _ := reqstate.NewKeyRing(k3)
	pinned, _ := audit.RingPublicKey(ring1, "")
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	write := func(ring *reqstate.KeyRing) {
		s, err := audit.RingSigner(ring, "")
		if err != nil {
			t.Fatal(err)
		}
		w, err := audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, Node: "n1", Signer: s, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		writeN(t, w, 2)
		w.Close()
	}
	write(ring1)
	write(ring2) // the rotation: k1's key certifies k2's
	write(ring2)
	res := sealed(t, pinned, nil, path)
	wantVerdict(t, res, audit.VerdictOK, "")
	if res.Last.Epoch != 1 {
		t.Fatalf("epoch %d after one rotation", res.Last.Epoch)
	}
	newer, _ := audit.RingPublicKey(ring2, "")
	wantVerdict(t, sealed(t, newer, nil, path), audit.VerdictBroken, audit.ProblemSignature)
	write(ring3) // k1 and k2 gone: nothing certifies k3's key
	wantVerdict(t, sealed(t, pinned, nil, path), audit.VerdictBroken, audit.ProblemSignature)
}
