package audit_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

var fixedTime = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// lineOfLen returns a line of exactly n bytes (without its newline),
// linked to prev, and the link to it.
func lineOfLen(t *testing.T, ring *reqstate.KeyRing, prev string, n int) []byte {
	t.Helper()
	keys := func() *reqstate.KeyRing { return ring }
	enc := func(target string) []byte {
		var buf bytes.Buffer
		w := audit.NewWriter(&buf, prev, &audit.Options{Keys: keys})
		if err := w.Write(&audit.Line{Time: fixedTime, Event: audit.EventCompleted, Target: target, Outcome: "complete"}); err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	base := len(enc(""))
	b := enc(strings.Repeat("a", n-base))
	if len(b) != n {
		t.Fatalf("a line of %d bytes, want %d", len(b), n)
	}
	return b
}

// TestLongestLine pins mutation survivors writer.go:167 (Tail reads
// MaxLineBytes, not more), line.go:98 (ParseLine unbounded) and
// verify.go:86 (an over-long line called truncated): a line of
// MaxLineBytes is a line, after another one too (a restart goes on from
// it), and one byte more is altered.
func TestLongestLine(t *testing.T) {
	ring := testRing(t)
	first := lineOfLen(t, ring, "", 300)
	longest := lineOfLen(t, ring, audit.LinkOf(first), audit.MaxLineBytes)
	trail := slicesConcat(first, []byte("\n"), longest, []byte("\n"))
	if res, err := audit.Verify(bytes.NewReader(trail), ring, nil); err != nil || res.Lines != 2 {
		t.Fatalf("Verify of a longest line: %+v, %v", res, err)
	}
	if _, err := audit.ParseLine(longest); err != nil {
		t.Fatalf("ParseLine of a longest line: %v", err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	os.WriteFile(path, trail, 0o600)
	w, err := audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	if err != nil {
		t.Fatalf("OpenFile on a trail ending in a longest line: %v", err)
	}
	w.Close()
	if w.Prev() != audit.LinkOf(longest) {
		t.Fatalf("OpenFile goes on from %s, want the longest line's link", w.Prev())
	}

	over := lineOfLen(t, ring, audit.LinkOf(first), audit.MaxLineBytes+1)
	if _, err := audit.ParseLine(over); !errors.Is(err, audit.ErrMalformed) {
		t.Fatalf("ParseLine of a line over MaxLineBytes: %v", err)
	}
	wantLineError(t, slicesConcat(first, []byte("\n"), over, []byte("\n")), ring, nil, 2, audit.ProblemAltered)
	// Over the limit and without its end: not a torn line (a torn line is
	// a part of a line), however long; the limit is the line's.
	for _, n := range []int{audit.MaxLineBytes + 100, 3 * audit.MaxLineBytes / 2, 2*audit.MaxLineBytes - 10} {
		junk := slicesConcat(first, []byte("\n"), []byte(`{"schema":"`), bytes.Repeat([]byte("a"), n-11), []byte("\n"), longest, []byte("\n"))
		wantLineError(t, junk, ring, nil, 2, audit.ProblemAltered)
	}
}

func slicesConcat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// TestParseLineForm pins mutation survivors line.go:115 (an empty kid
// accepted), :107 (a mac not checked as base64url) and verify.go:141
// (torn ignores the closing brace): each is malformed, and Verify calls
// a whole line that is malformed altered, never torn.
func TestParseLineForm(t *testing.T) {
	ring := testRing(t)
	good := lineOfLen(t, ring, "", 300)
	if _, err := audit.ParseLine(good); err != nil {
		t.Fatal(err)
	}
	mac := bytes.LastIndex(good, []byte(`"mac":"`)) + len(`"mac":"`)
	for name, b := range map[string][]byte{
		"empty kid":    bytes.Replace(good, []byte(`"kid":"k1"`), []byte(`"kid":""`), 1),
		"mac with +":   slicesConcat(good[:mac], []byte("+"), good[mac+1:]),
		"mac with =":   slicesConcat(good[:mac+42], []byte("="), good[mac+43:]),
		"no event":     bytes.Replace(good, []byte(`"event":"completed"`), []byte(`"event":""`), 1),
		"other schema": bytes.Replace(good, []byte(`mrtr.audit/v1`), []byte(`mrtr.audit/v2`), 1),
	} {
		if _, err := audit.ParseLine(b); !errors.Is(err, audit.ErrMalformed) {
			t.Errorf("ParseLine, %s: %v", name, err)
		}
		wantLineError(t, append(bytes.Clone(b), '\n'), ring, nil, 1, audit.ProblemAltered)
	}
}

// TestEscapes pins mutation survivors line.go:228 and :237: DEL, U+2028
// and U+2029 are escaped (a terminal or a JavaScript reader of the trail
// sees them as what they are), and read back as they were.
func TestEscapes(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	const target = "a\x7fb\u2028c\u2029d\x1be"
	if err := w.Write(&audit.Line{Event: audit.EventCompleted, Target: target, Outcome: "complete"}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if !bytes.Contains(b, []byte(`"target":"a\u007fb\u2028c\u2029d\u001be"`)) {
		t.Fatalf("not escaped: %q", b)
	}
	l, err := audit.ParseLine(bytes.TrimSuffix(b, []byte("\n")))
	if err != nil || l.Target != target {
		t.Fatalf("read back: %v %q", err, l.Target)
	}
}

// TestNewSecretSameKid pins mutation survivor writer.go:380: a ring with
// the same kid and another secret (a key replaced, not rotated) MACs
// the lines after it under the new secret.
func TestNewSecretSameKid(t *testing.T) {
	r1, r2 := testRing(t), testRing(t) // both k1
	var cur atomic.Pointer[reqstate.KeyRing]
	cur.Store(r1)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: cur.Load})
	writeN(t, w, 1)
	cur.Store(r2)
	writeN(t, w, 1)
	ls := lines(buf.Bytes())
	if _, err := audit.Verify(bytes.NewReader(ls[1]), r2, &audit.VerifyOptions{Continued: true}); err != nil {
		t.Fatalf("the line after the new secret, under it: %v", err)
	}
}

// TestDigestPerArguments pins mutation survivor keys.go:64 (the digest
// cache ignores the hash): calls with other arguments get other digests,
// calls with equal arguments equal ones; and :481, no trace_id with
// TraceIDs off.
func TestDigestPerArguments(t *testing.T) {
	ring := testRing(t)
	codec := reqstate.New(ring, nil)
	var buf bytes.Buffer
	g := mrtr.New(codec, &mrtr.Options{Store: replay.NewMemory(nil), Auditor: audit.NewWriter(&buf, "", &audit.Options{Keys: codec.KeyRing})})
	ctx := context.Background()
	for _, args := range []string{`{"env":"a"}`, `{"env":"b"}`, `{"env":"b"}`, `{"env":"a"}`} {
		r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", Arguments: []byte(args),
			Meta: map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
		f, err := g.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Finish(ctx, mrtr.OutcomeComplete, 0); err != nil {
			t.Fatal(err)
		}
		f.End(ctx, nil)
	}
	var d []string
	for _, b := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		l, err := audit.ParseLine(b)
		if err != nil {
			t.Fatal(err)
		}
		if l.TraceID != "" || bytes.Contains(b, []byte("trace_id")) {
			t.Fatalf("a trace_id with TraceIDs off: %s", b)
		}
		d = append(d, l.ArgsDigest)
	}
	if len(d) != 4 || d[0] == d[1] || d[1] != d[2] || d[0] != d[3] || d[0] == "" {
		t.Fatalf("digests %v: want a, b, b, a", d)
	}
}

// counting is a destination that counts the Writes in flight at once.
type counting struct {
	mu       sync.Mutex
	now, max int
	buf      bytes.Buffer
}

func (c *counting) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
	runtime.Gosched() // a slow disk: let others in
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now--
	return c.buf.Write(p)
}

// TestOneWriteAtATime pins what the guard of writer.go:288 is for (the
// batch handover takes the turn only with no write in flight): however
// many callers, the destination sees one Write at a time. Dropping that
// guard alone does not fail it, here or under -race: a batch's ready is
// closed only by a write that ends (writing false), and every write that
// starts after it takes w.cur, so w.cur == b implies no write in flight
// (an equivalent mutant); the test keeps the property if that changes.
func TestOneWriteAtATime(t *testing.T) {
	ring := testRing(t)
	dst := &counting{}
	w := audit.NewWriter(dst, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { writeN(t, w, 100) })
	}
	wg.Wait()
	if dst.max != 1 {
		t.Fatalf("%d writes in flight at once, want 1", dst.max)
	}
	if res, err := audit.Verify(bytes.NewReader(dst.buf.Bytes()), ring, nil); err != nil || res.Lines != 800 {
		t.Fatalf("Verify: %+v, %v", res, err)
	}
}
