package audit

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// epochTrail writes a trail whose key evolves twice (epochs 0, 1, 2),
// keeping a copy of the key file at each epoch (what an attacker who
// took the node at that epoch holds). It returns the trail's path, the
// key files by epoch, the public key and the clock.
type epochFixture struct {
	dir, path string
	keys      [3]string // the key file as it was in epoch i
	pub       PublicKey
	ring      *reqstate.KeyRing
	mu        sync.Mutex
	now       time.Time
}

func (f *epochFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(time.Millisecond)
	return f.now
}

func (f *epochFixture) set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}

var epochStart = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func (f *epochFixture) opts(s *Signer) *Options {
	return &Options{Keys: func() *reqstate.KeyRing { return f.ring }, Node: "n1", Signer: s, CheckpointInterval: -1, Now: f.clock}
}

// newFixture makes a fixture's directory, ring and node key; it returns
// the key file's path.
func newFixture(t *testing.T) (*epochFixture, string) {
	t.Helper()
	f := &epochFixture{dir: t.TempDir(), ring: mustRing(t), now: epochStart}
	f.path = filepath.Join(f.dir, "audit.jsonl")
	key := filepath.Join(f.dir, "audit.key")
	pub, err := GenerateKeyFile(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.pub = pub
	return f, key
}

func newEpochTrail(t *testing.T) *epochFixture {
	t.Helper()
	f, key := newFixture(t)
	s, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	w, err := OpenFile(f.path, f.opts(s))
	if err != nil {
		t.Fatal(err)
	}
	for e := range 3 {
		b, _ := os.ReadFile(key)
		f.keys[e] = filepath.Join(f.dir, "epoch"+strconv.Itoa(e)+".key")
		os.WriteFile(f.keys[e], b, 0o600)
		for i := range 3 {
			if err := w.Write(&Line{Event: EventCompleted, Outcome: "complete", RequestID: strconv.Itoa(10*e + i)}); err != nil {
				t.Fatal(err)
			}
		}
		if e < 2 {
			f.set(epochStart.Add(time.Duration(e+1) * 16 * time.Minute))
			w.Checkpoint() // certifies epoch e+1
		}
	}
	w.Close()
	if s.Epoch() != 2 {
		t.Fatalf("epoch %d", s.Epoch())
	}
	return f
}

func mustRing(t *testing.T) *reqstate.KeyRing {
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func verifyFile(t *testing.T, pub PublicKey, path string) SealResult {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := VerifySealed(pub, []io.Reader{bytes.NewReader(b)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func trailLines(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// resign re-encodes the checkpoint line b after edit, signed by s.
func resign(t *testing.T, ring *reqstate.KeyRing, b []byte, s *Signer, edit func(*Checkpoint)) []byte {
	t.Helper()
	l, err := ParseLine(bytes.TrimSuffix(b, []byte("\n")))
	if err != nil || l.Checkpoint == nil {
		t.Fatalf("not a checkpoint line: %v", err)
	}
	c := l.Checkpoint
	edit(c)
	m, ok := c.message()
	if !ok {
		t.Fatal("message")
	}
	s.mu.Lock()
	copy(c.Sig[:], signWith(s, m))
	s.mu.Unlock()
	// The ring MAC does not matter to VerifySealed; keep the line's form.
	var buf bytes.Buffer
	w := NewWriter(&buf, l.Prev, &Options{Keys: func() *reqstate.KeyRing { return ring }})
	w.mu.Lock()
	w.queue(l, nil)
	out := append([]byte(nil), w.pending...)
	w.mu.Unlock()
	return out
}

// TestCheckpointOtherEpochKeyRefused pins issue 37 item 5: a checkpoint
// signed with another epoch's key than the one the chain certifies for
// it is refused, whether an older key (a backup of the key file) or a
// newer one, and whatever epoch it claims.
func TestCheckpointOtherEpochKeyRefused(t *testing.T) {
	f := newEpochTrail(t)
	if res := verifyFile(t, f.pub, f.path); res.Verdict != VerdictOK || res.Last.Epoch != 2 {
		t.Fatalf("the honest trail: %+v %v", res, res.Err)
	}
	ls := trailLines(t, f.path)
	last := len(ls) - 1 // the final checkpoint, epoch 2
	for _, c := range []struct {
		name  string
		key   int
		epoch uint64
	}{
		{"epoch 0 key, claims 2", 0, 2},
		{"epoch 0 key, claims 0", 0, 0},
		{"epoch 1 key, claims 1", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := LoadSigner(f.keys[c.key])
			if err != nil {
				t.Fatal(err)
			}
			forged := append(append([][]byte(nil), ls[:last]...), resign(t, f.ring, ls[last], s, func(cp *Checkpoint) { cp.Epoch = c.epoch }))
			p := filepath.Join(t.TempDir(), "forged.jsonl")
			os.WriteFile(p, bytes.Join(forged, nil), 0o600)
			res := verifyFile(t, f.pub, p)
			if res.Verdict != VerdictBroken || res.Err.Problem != ProblemSignature || res.Err.Pos.Line != last+1 {
				t.Fatalf("%+v (%v), want bad signature on line %d", res, res.Err, last+1)
			}
		})
	}
	// A checkpoint of epoch 1 re-signed by the epoch 2 key.
	s2, _ := LoadSigner(f.keys[2])
	i := 4 + 4 // genesis, 3 lines, checkpoint (epoch 0 -> 1), 3 lines: the next checkpoint is line 9, signed in epoch 1
	forged := append([][]byte(nil), ls...)
	forged[i] = resign(t, f.ring, ls[i], s2, func(*Checkpoint) {})
	p := filepath.Join(t.TempDir(), "forged.jsonl")
	os.WriteFile(p, bytes.Join(forged, nil), 0o600)
	if res := verifyFile(t, f.pub, p); res.Verdict != VerdictBroken || res.Err.Problem != ProblemSignature || res.Err.Pos.Line != i+1 {
		t.Fatalf("an epoch 1 checkpoint signed by the epoch 2 key: %+v (%v)", res, res.Err)
	}
}

// TestJournaldCVE202331439Class pins issue 37 item 5 against the class of
// journald's CVE-2023-31439 (journalctl --verify accepted old entries
// sealed with a too recent key: an attacker with the current key
// removed the seals and re-sealed everything). Here an attacker holds
// the key file of epoch 2 (the node taken at 10:40); the certifications
// in it are genuine. Every way of re-sealing lines from before epoch 2
// began (10:32) with it is refused:
//   - a whole new trail, its first checkpoint carrying the chain to
//     epoch 2, dated back to 10:00;
//   - the trail's sealed prefix kept (up to the epoch 0 -> 1
//     checkpoint), the rest replaced by a restart under the epoch 2 key
//     dated in epoch 1;
//   - the checkpoints after the first stripped and one checkpoint under
//     the epoch 2 key, carrying the chain, sealing every line.
func TestJournaldCVE202331439Class(t *testing.T) {
	f := newEpochTrail(t)
	stolen := func() *Signer {
		s, err := LoadSigner(f.keys[2])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// forge keeps the first keep lines of the trail (none: a new trail),
	// then writes one line with the stolen key and the clock at at, and
	// checks that verify refuses it on line bad.
	forge := func(t *testing.T, keep int, at time.Time, bad int) {
		p := filepath.Join(t.TempDir(), "forged.jsonl")
		os.WriteFile(p, bytes.Join(trailLines(t, f.path)[:keep], nil), 0o600)
		f.set(at)
		w, err := OpenFile(p, f.opts(stolen()))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(&Line{Event: EventCompleted, Outcome: "complete"})
		w.Close()
		res := verifyFile(t, f.pub, p)
		if res.Verdict != VerdictBroken || res.Err.Problem != ProblemEpoch || res.Err.Pos.Line != bad {
			t.Fatalf("%+v (%v), want %s on line %d", res, res.Err, ProblemEpoch, bad)
		}
	}
	t.Run("new trail dated back", func(t *testing.T) { forge(t, 0, epochStart, 1) })
	// Up to the epoch 0 -> 1 checkpoint, then a restart dated in epoch 1.
	t.Run("restart dated back", func(t *testing.T) { forge(t, 5, epochStart.Add(20*time.Minute), 6) })
	// Dated after epoch 2 began, so every time holds: what is refused is
	// bridging two epochs, which no crash does (the key evolves only at a
	// checkpoint, one epoch at a time).
	t.Run("cut back two epochs, restart after", func(t *testing.T) { forge(t, 1, epochStart.Add(41*time.Minute), 2) })
	t.Run("re-sealed with the chain", func(t *testing.T) {
		ls := trailLines(t, f.path)
		var kept [][]byte
		for i, b := range ls {
			if i == 0 || !bytes.Contains(b, []byte(`"event":"checkpoint"`)) {
				kept = append(kept, b)
			}
		}
		// Relink the kept lines and seal them with one epoch 2 checkpoint
		// that carries the certifications of epochs 1 and 2.
		s := stolen()
		var buf bytes.Buffer
		w := NewWriter(&buf, "", &Options{Keys: func() *reqstate.KeyRing { return f.ring }})
		for _, b := range kept[1:] {
			l, _ := ParseLine(bytes.TrimSuffix(b, []byte("\n")))
			w.Write(l)
		}
		body := append(append([]byte(nil), kept[0]...), buf.Bytes()...)
		// Fix the first relinked line to link to the genesis.
		trail := relinkAll(t, f.ring, body)
		ls2 := bytes.SplitAfter(bytes.TrimSuffix(trail, []byte("\n")), []byte("\n"))
		g, _ := ParseLine(bytes.TrimSuffix(ls2[0], []byte("\n")))
		cp := &Checkpoint{Node: "n1", Seq: 2, Count: uint64(len(ls2)), Head: linkOf(bytes.TrimSuffix(ls2[len(ls2)-1], []byte("\n"))),
			Time: epochStart.Add(41 * time.Minute), Prev: g.Checkpoint.Hash(), Epoch: 2, Certs: s.certsSince(0), Final: true}
		m, _ := cp.message()
		s.mu.Lock()
		copy(cp.Sig[:], signWith(s, m))
		s.mu.Unlock()
		l := &Line{Schema: Schema, Event: EventCheckpoint, Time: cp.Time, Node: "n1", Checkpoint: cp}
		var out bytes.Buffer
		cw := NewWriter(&out, cp.Head, &Options{Keys: func() *reqstate.KeyRing { return f.ring }})
		cw.mu.Lock()
		cw.queue(l, nil)
		trail = append(trail, cw.pending...)
		cw.mu.Unlock()
		p := filepath.Join(t.TempDir(), "forged.jsonl")
		os.WriteFile(p, trail, 0o600)
		res := verifyFile(t, f.pub, p)
		if res.Verdict != VerdictBroken || res.Err.Problem != ProblemEpoch {
			t.Fatalf("%+v (%v), want %s", res, res.Err, ProblemEpoch)
		}
	})
}

// relinkAll rewrites the links of a trail's lines after the first so the
// chain holds (an attacker with the file can always do this).
func relinkAll(t *testing.T, ring *reqstate.KeyRing, trail []byte) []byte {
	ls := bytes.SplitAfter(bytes.TrimSuffix(trail, []byte("\n")), []byte("\n"))
	out := append([]byte(nil), ls[0]...)
	prev := linkOf(bytes.TrimSuffix(ls[0], []byte("\n")))
	for _, b := range ls[1:] {
		l, err := ParseLine(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, prev, &Options{Keys: func() *reqstate.KeyRing { return ring }})
		w.Write(l)
		out = append(out, buf.Bytes()...)
		prev = w.Prev()
	}
	return out
}

// TestCrashAfterKeyEvolved: the key file is replaced before the
// checkpoint that certifies its epoch is written; a crash between the
// two leaves a key file one epoch ahead of the trail, and the restart
// carries the certification in place of the lost checkpoint: the trail
// verifies with FILE.pub.
func TestCrashAfterKeyEvolved(t *testing.T) {
	f, key := newFixture(t)
	pub := f.pub
	s, _ := LoadSigner(key)
	w, err := OpenFile(f.path, f.opts(s))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&Line{Event: EventCompleted, Outcome: "complete"})
	w.mu.Lock()
	seq := w.seq + 1
	w.mu.Unlock()
	f.set(epochStart.Add(16 * time.Minute))
	if _, err := s.prepare(f.clock(), seq); err != nil { // the key file is in epoch 1; the process dies
		t.Fatal(err)
	}
	s2, _ := LoadSigner(key)
	if s2.Epoch() != 1 {
		t.Fatalf("epoch %d", s2.Epoch())
	}
	w2, err := OpenFile(f.path, f.opts(s2))
	if err != nil {
		t.Fatal(err)
	}
	w2.Write(&Line{Event: EventCompleted, Outcome: "complete"})
	w2.Close()
	res := verifyFile(t, pub, f.path)
	if res.Verdict != VerdictUnsealed || res.Err != nil || res.Abandoned != 1 || res.Last.Epoch != 1 {
		t.Fatalf("%+v (%v)", res, res.Err)
	}
}

// TestKeyFileCannotEvolve: a key file that cannot be replaced when its
// epoch ends (here its directory is gone) turns the Signer static: the
// Writer reports it (OnError, the log), signs on without evolving, and
// the trail verifies.
func TestKeyFileCannotEvolve(t *testing.T) {
	f := &epochFixture{dir: t.TempDir(), ring: mustRing(t), now: epochStart}
	keyDir := filepath.Join(f.dir, "keys")
	os.Mkdir(keyDir, 0o700)
	key := filepath.Join(keyDir, "audit.key")
	pub, err := GenerateKeyFile(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := LoadSigner(key)
	if s.Mode() != KeyEvolving {
		t.Fatalf("mode %v", s.Mode())
	}
	var reported []error
	o := f.opts(s)
	o.OnError = func(err error) { reported = append(reported, err) }
	path := filepath.Join(f.dir, "audit.jsonl")
	w, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(keyDir); err != nil {
		t.Fatal(err)
	}
	w.Write(&Line{Event: EventCompleted, Outcome: "complete"})
	f.set(epochStart.Add(16 * time.Minute))
	if err := w.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if s.Mode() != KeyStatic || s.WhyStatic() == "" || s.Epoch() != 0 || len(reported) != 1 {
		t.Fatalf("mode %v (%s), epoch %d, reported %v", s.Mode(), s.WhyStatic(), s.Epoch(), reported)
	}
	if res := verifyFile(t, pub, path); res.Verdict != VerdictOK {
		t.Fatalf("%+v (%v)", res, res.Err)
	}
}

// TestKeyModes: every mode names itself and says what it gives up.
func TestKeyModes(t *testing.T) {
	for _, m := range []KeyMode{KeyEvolving, KeyStatic, KeyRingDerived} {
		if m.String() == "unknown" || m.GivesUp() == "" {
			t.Errorf("mode %d: %q %q", m, m, m.GivesUp())
		}
	}
}

// TestOpeningCertsLines: a trail begun with a key evolved more times
// than a checkpoint carries certifications opens with certs lines, and
// verifies with FILE.pub; a certs line anywhere else is refused.
func TestOpeningCertsLines(t *testing.T) {
	defer func(n int) { certsPerLine = n }(certsPerLine)
	certsPerLine = 2
	f, key := newFixture(t)
	s, _ := LoadSigner(key)
	for i := range 5 {
		e, err := s.prepare(epochStart.Add(time.Duration(i+1)*time.Minute), uint64(i+2))
		if err != nil {
			t.Fatal(err)
		}
		s.commit(e)
	}
	f.set(epochStart.Add(time.Hour))
	w, err := OpenFile(f.path, f.opts(s))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&Line{Event: EventCompleted, Outcome: "complete"})
	w.Close()
	ls := trailLines(t, f.path)
	if len(ls) != 5 || !bytes.Contains(ls[0], []byte(`"event":"certs"`)) || !bytes.Contains(ls[1], []byte(`"event":"certs"`)) {
		t.Fatalf("the opening:\n%s", bytes.Join(ls, nil))
	}
	res := verifyFile(t, f.pub, f.path)
	if res.Verdict != VerdictOK || res.FirstEpoch != 5 {
		t.Fatalf("%+v (%v)", res, res.Err)
	}
	// A certs line after the first checkpoint, linked in.
	l, _ := ParseLine(bytes.TrimSuffix(ls[1], []byte("\n")))
	l.Time = l.Time.Add(time.Hour)
	var buf bytes.Buffer
	cw := NewWriter(&buf, linkOf(bytes.TrimSuffix(ls[len(ls)-1], []byte("\n"))), &Options{Keys: func() *reqstate.KeyRing { return f.ring }})
	cw.mu.Lock()
	cw.queue(l, nil)
	moved := append(append(bytes.Join(ls, nil), '\n'), cw.pending...) // the last of ls has no newline
	cw.mu.Unlock()
	p := filepath.Join(t.TempDir(), "moved.jsonl")
	os.WriteFile(p, moved, 0o600)
	if res := verifyFile(t, f.pub, p); res.Verdict != VerdictBroken || res.Err.Problem != ProblemEpoch || res.Err.Pos.Line != 6 {
		t.Fatalf("a certs line after the first checkpoint: %+v (%v)", res, res.Err)
	}
}

// TestJournaldCVE202331438Class pins issue 37 item 5 against the class of
// journald's CVE-2023-31438 (a sealed journal truncated and continued
// verified clean, because epochs without entries were not sealed). Here
// the trail is cut back to a checkpoint, and the node, with its own key
// file, restarts on it and writes on:
//   - cut back more than an epoch: the restart would have to bridge
//     two epochs, which no crash does (every epoch's end is sealed,
//     idle or not): broken, with or without the log;
//   - cut back within the epoch: only the log's copy of the checkpoints
//     shows it (two checkpoints for one sequence); without the log the
//     trail is a clean one, as journald's is within its epoch.
func TestJournaldCVE202331438Class(t *testing.T) {
	f := newEpochTrail(t)
	orig, _ := os.ReadFile(f.path)
	log, err := ReadCheckpoints(bytes.NewReader(orig)) // the copy a log pipeline carried off the host
	if err != nil || len(log) != 4 {
		t.Fatalf("%d checkpoints, %v", len(log), err)
	}
	cut := func(t *testing.T, keep int) string {
		p := filepath.Join(t.TempDir(), "cut.jsonl")
		os.WriteFile(p, bytes.Join(trailLines(t, f.path)[:keep], nil), 0o600)
		key, _ := os.ReadFile(filepath.Join(f.dir, "audit.key")) // the node's own key file, epoch 2
		kp := filepath.Join(t.TempDir(), "audit.key")
		os.WriteFile(kp, key, 0o600)
		s, err := LoadSigner(kp)
		if err != nil {
			t.Fatal(err)
		}
		f.set(epochStart.Add(50 * time.Minute))
		w, err := OpenFile(p, f.opts(s))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(&Line{Event: EventCompleted, Outcome: "complete"})
		w.Close()
		return p
	}
	verify := func(t *testing.T, p string, log []Checkpoint) SealResult {
		b, _ := os.ReadFile(p)
		res, err := VerifySealed(f.pub, []io.Reader{bytes.NewReader(b)}, &SealOptions{Checkpoints: log})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("more than an epoch", func(t *testing.T) {
		p := cut(t, 1) // the first checkpoint, epoch 0
		for _, l := range [][]Checkpoint{nil, log} {
			if res := verify(t, p, l); res.Verdict != VerdictBroken || res.Err.Problem != ProblemEpoch {
				t.Fatalf("%+v (%v)", res, res.Err)
			}
		}
	})
	t.Run("within the epoch", func(t *testing.T) {
		p := cut(t, 9) // up to the epoch 1 -> 2 checkpoint: epoch 2's lines and the final checkpoint cut
		if res := verify(t, p, nil); res.Verdict != VerdictOK {
			t.Fatalf("without the log: %+v (%v)", res, res.Err)
		}
		if res := verify(t, p, log); res.Verdict != VerdictBroken || res.Err.Problem != ProblemFork {
			t.Fatalf("with the log: %+v (%v)", res, res.Err)
		}
	})
}
