package audit_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

// tornTrail writes 3 lines, tears the 4th as a crash mid-write does (the
// file cut inside it), and writes 4 more after a restart: 3 good, the
// torn one, 4 good.
func tornTrail(t *testing.T, ring *reqstate.KeyRing) []byte {
	t.Helper()
	keys := func() *reqstate.KeyRing { return ring }
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.OpenFile(path, &audit.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 4)
	w.Close()
	b, _ := os.ReadFile(path)
	if err := os.Truncate(path, int64(len(b)-40)); err != nil {
		t.Fatal(err)
	}
	if w, err = audit.OpenFile(path, &audit.Options{Keys: keys}); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 4)
	w.Close()
	b, _ = os.ReadFile(path)
	return b
}

// TestVerifyPastTornLine pins issue 35 item 10: Verify reports a torn
// line and checks every line after it: a trail whose only fault is the
// torn line names it (and counts the good lines after it); an altered,
// deleted or inserted line after it is named.
func TestVerifyPastTornLine(t *testing.T) {
	ring := testRing(t)
	b := tornTrail(t, ring)
	res, err := audit.Verify(bytes.NewReader(b), ring, nil)
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != 4 || le.Problem != audit.ProblemTruncated || res.Lines != 7 || !slices.Equal(res.Torn, []int{4}) {
		t.Fatalf("Verify of a trail with a torn line: %+v, %v; want line 4 truncated, 7 good lines, torn [4]", res, err)
	}
	if res.LastEvent != audit.EventCompleted || res.LastTime.IsZero() {
		t.Fatalf("last line: %q at %v", res.LastEvent, res.LastTime)
	}
	if res.Cut {
		t.Fatal("Cut for a trail that ends in a newline")
	}
	if res, _ := audit.Verify(bytes.NewReader(b[:len(b)-1]), ring, nil); !res.Cut || !slices.Equal(res.Torn, []int{4, 8}) {
		t.Fatalf("a trail cut inside its last line: %+v", res)
	}
	ls := lines(b)
	ls = ls[:len(ls)-1]

	altered := join(ls)
	i := bytes.LastIndex(altered, []byte(`"outcome":"complete"`)) + len(`"outcome":"`)
	altered[i] = 'C' // line 8
	wantLineError(t, altered, ring, nil, 8, audit.ProblemAltered)

	deleted := join(slices.Concat(ls[:6], ls[7:])) // line 7 deleted
	wantLineError(t, deleted, ring, nil, 7, audit.ProblemBrokenLink)

	wantLineError(t, join(slices.Concat(ls[:4], ls[5:])), ring, nil, 5, audit.ProblemBrokenLink) // the line after the torn one deleted
	wantLineError(t, join(slices.Concat(ls[:3], ls[4:])), ring, nil, 4, audit.ProblemBrokenLink) // the torn one deleted

	swapped := join(slices.Concat(ls[:5], [][]byte{ls[6], ls[5]}, ls[7:]))
	wantLineError(t, swapped, ring, nil, 6, audit.ProblemBrokenLink)

	// A second torn line: both listed, the first named.
	two := join(slices.Concat(ls[:6], [][]byte{append(bytes.Clone(ls[6][:50]), '\n')}))
	res, err = audit.Verify(bytes.NewReader(two), ring, nil)
	if !errors.As(err, &le) || le.Line != 4 || !slices.Equal(res.Torn, []int{4, 7}) {
		t.Fatalf("two torn lines: %+v, %v", res, err)
	}
}

// partial is a destination whose next write, when cut is set, writes
// only cut bytes and fails.
type partial struct {
	bytes.Buffer
	cut int
}

func (p *partial) Write(b []byte) (int, error) {
	if p.cut > 0 {
		n := min(p.cut, len(b))
		p.cut = 0
		p.Buffer.Write(b[:n])
		return n, errors.New("disk full")
	}
	return p.Buffer.Write(b)
}

// TestTornWriteThenLines pins the writer's side of issue 35 item 10 and
// mutation survivors writer.go:352 (torn not set after a partial failed
// write) and :345 (a short write not an error): a write cut short inside
// its line fails, the next line ends the torn one and links to its bytes,
// and Verify names the torn line and checks the lines after it.
func TestTornWriteThenLines(t *testing.T) {
	ring := testRing(t)
	var dst partial
	var failures int
	w := audit.NewWriter(&dst, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, OnError: func(error) { failures++ }})
	writeN(t, w, 2)
	dst.cut = 40
	if err := w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"}); err == nil || failures != 1 {
		t.Fatalf("a write cut short: %v, %d failures counted", err, failures)
	}
	writeN(t, w, 3)
	res, err := audit.Verify(bytes.NewReader(dst.Bytes()), ring, nil)
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != 3 || le.Problem != audit.ProblemTruncated || res.Lines != 5 || !slices.Equal(res.Torn, []int{3}) {
		t.Fatalf("Verify after a torn write: %+v, %v; want line 3 truncated and 5 good lines:\n%s", res, err, dst.Bytes())
	}
}

// short is a destination that writes half of what it is given and says
// so, without an error: io.Writer's contract broken, as a short write.
type short struct{ bytes.Buffer }

func (s *short) Write(b []byte) (int, error) { return s.Buffer.Write(b[:len(b)/2]) }

// TestShortWriteFails pins mutation survivor writer.go:345: a write that
// writes less than it was given, without an error, is a failed write.
func TestShortWriteFails(t *testing.T) {
	ring := testRing(t)
	var failures int
	w := audit.NewWriter(&short{}, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }, OnError: func(error) { failures++ }})
	if err := w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"}); !errors.Is(err, io.ErrShortWrite) || failures != 1 {
		t.Fatalf("a short write: %v, %d failures counted; want io.ErrShortWrite, 1", err, failures)
	}
}

// TestVerifyUnknownKey pins mutation survivor verify.go:100 and issue 39
// item 3: a line under a kid the ring lacks is named, with its kid.
func TestVerifyUnknownKey(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	writeN(t, w, 2)
	other, err := reqstate.GenerateKeyRing("k2", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = audit.Verify(bytes.NewReader(buf.Bytes()), other, nil)
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != 1 || le.Problem != audit.ProblemUnknownKey || le.KeyID != "k1" || !strings.Contains(err.Error(), `unknown key "k1"`) {
		t.Fatalf("Verify under a ring without the kid: %v", err)
	}
}

// TestVerifyContinuedFirstOnly pins mutation survivor verify.go:110:
// Continued accepts any link on the first line only.
func TestVerifyContinuedFirstOnly(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	writeN(t, w, 5)
	ls := lines(buf.Bytes())
	cut := join(slices.Concat(ls[1:2], ls[3:])) // the first line gone (Continued), and the third
	wantLineError(t, cut, ring, &audit.VerifyOptions{Continued: true}, 2, audit.ProblemBrokenLink)
}
