package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

const (
	secretArg    = "s3cret-argument-value"
	secretAnswer = "answer-content-value"
)

func testRing(t testing.TB) *reqstate.KeyRing {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// flows runs n two-round flows through a guard whose Auditor is w, and
// returns the last sealed token.
func flows(t testing.TB, codec *reqstate.AESGCM, w mrtr.Auditor, n int) string {
	t.Helper()
	g := mrtr.New(codec, &mrtr.Options{Store: replay.NewMemory(nil), Auditor: w})
	ctx := context.Background()
	var tok string
	for range n {
		r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", RequestID: "7",
			Principal: reqstate.Principal{Issuer: "https://id.example", Subject: "alice"},
			Arguments: []byte(`{"env":"` + secretArg + `"}`),
			Meta: map[string]any{"io.modelcontextprotocol/clientInfo": map[string]any{"name": "cli", "version": "1.2"},
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
		f, err := g.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err = f.PauseInputs(nil, mrtr.Input{Key: "confirm", Method: "elicitation/create"}); err != nil {
			t.Fatal(err)
		}
		f.End(ctx, nil)
		r.RequestState = tok
		r.InputResponses = map[string]any{"confirm": json.RawMessage(`{"action":"accept","content":{"note":"` + secretAnswer + `"}}`)}
		if f, err = g.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := f.Finish(ctx, mrtr.OutcomeComplete, 0); err != nil {
			t.Fatal(err)
		}
		f.End(ctx, nil)
		if _, err := g.Begin(ctx, r); !errors.Is(err, mrtr.ErrRejected) { // replayed
			t.Fatalf("replay: %v", err)
		}
	}
	return tok
}

func lines(b []byte) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(b, nil), []byte("\n"))
}

func join(ls [][]byte) []byte { return bytes.Join(ls, nil) }

func wantLineError(t *testing.T, trail []byte, ring *reqstate.KeyRing, opts *audit.VerifyOptions, line int, p audit.Problem) {
	t.Helper()
	_, err := audit.Verify(bytes.NewReader(trail), ring, opts)
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != line || le.Problem != p {
		t.Fatalf("Verify: %v, want line %d: %s", err, line, p)
	}
}

// TestChainAndVerify pins issue 29 item 3: a trail verifies, and an
// altered, deleted, inserted or truncated line is named.
func TestChainAndVerify(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, "", &audit.Options{Keys: reqstate.New(ring, nil).KeyRing, Node: "n1", TraceIDs: true})
	flows(t, reqstate.New(ring, nil), w, 2)
	trail := buf.Bytes()
	ls := lines(trail)
	ls = ls[:len(ls)-1] // SplitAfter leaves an empty tail
	if len(ls) != 8 {
		t.Fatalf("%d lines, want 8 (paused, resumed, completed, rejected, twice):\n%s", len(ls), trail)
	}
	res, err := audit.Verify(bytes.NewReader(trail), ring, nil)
	if err != nil || res.Lines != 8 || res.First != "" || res.Last != w.Prev() {
		t.Fatalf("Verify = %+v, %v; writer's prev %s", res, err, w.Prev())
	}
	var events []string
	for _, b := range ls {
		l, err := audit.ParseLine(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, l.Event)
		if l.Time.Location() != time.UTC || l.Node != "n1" || l.Principal.Subject != "alice" || l.Client == nil || l.Client.Name != "cli" ||
			l.RequestID != "7" || l.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || !strings.HasPrefix(l.ArgsDigest, "hmac-sha256:") || l.Flow == "" || l.KeyID != "k1" {
			t.Fatalf("line %s", b)
		}
	}
	if got := strings.Join(events, ","); got != "paused,resumed,completed,rejected,paused,resumed,completed,rejected" {
		t.Fatalf("events %s", got)
	}
	first, _ := audit.ParseLine(bytes.TrimSpace(ls[0]))
	rej, _ := audit.ParseLine(bytes.TrimSpace(ls[3]))
	if rej.Reason != "replayed" || rej.Flow != first.Flow || rej.Round != 1 || rej.ArgsDigest != first.ArgsDigest {
		t.Fatalf("rejected line %s, first %s", ls[3], ls[0])
	}

	altered := bytes.Clone(trail)
	i := bytes.Index(altered, []byte(`"sub":"alice"`)) + len(`"sub":"`)
	i = bytes.Index(altered[len(ls[0])+len(ls[1]):], []byte(`"sub":"alice"`)) + len(ls[0]) + len(ls[1]) + len(`"sub":"`)
	altered[i] = 'A' // line 3
	wantLineError(t, altered, ring, nil, 3, audit.ProblemAltered)

	deleted := join(append(append([][]byte{}, ls[:2]...), ls[3:]...))
	wantLineError(t, deleted, ring, nil, 3, audit.ProblemBrokenLink)

	inserted := join(append(append(append([][]byte{}, ls[:2]...), ls[6]), ls[2:]...)) // a genuine line, out of place
	wantLineError(t, inserted, ring, nil, 3, audit.ProblemBrokenLink)

	wantLineError(t, join(ls[1:]), ring, nil, 1, audit.ProblemBrokenLink) // the first line deleted
	if _, err := audit.Verify(bytes.NewReader(join(ls[1:])), ring, &audit.VerifyOptions{Continued: true}); err != nil {
		t.Fatalf("a continued trail: %v", err)
	}

	wantLineError(t, trail[:len(trail)-1], ring, nil, 8, audit.ProblemTruncated)  // no newline
	wantLineError(t, trail[:len(trail)-30], ring, nil, 8, audit.ProblemTruncated) // cut inside
	other := testRing(t)
	wantLineError(t, trail, other, nil, 1, audit.ProblemAltered) // same kid, other secret
}

// TestNoSecrets pins issue 29 item 2 on a real flow: neither the argument
// value, nor the answer's content, nor the token appears in the trail.
func TestNoSecrets(t *testing.T) {
	ring := testRing(t)
	var buf bytes.Buffer
	codec := reqstate.New(ring, nil)
	tok := flows(t, codec, audit.NewWriter(&buf, "", &audit.Options{Keys: codec.KeyRing}), 1)
	for _, s := range []string{secretArg, secretAnswer, tok, tok[len(tok)-20:]} {
		if bytes.Contains(buf.Bytes(), []byte(s)) {
			t.Fatalf("the trail holds %q:\n%s", s, buf.Bytes())
		}
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"answers":[{"key":"confirm","action":"accept"}]`)) {
		t.Fatalf("no answer action in\n%s", buf.Bytes())
	}
}

// TestRestartContinuesChain pins that a Writer opened on an existing
// trail goes on with its chain, and that Reopen (logrotate) goes on in a
// new file.
func TestRestartContinuesChain(t *testing.T) {
	ring := testRing(t)
	codec := reqstate.New(ring, nil)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for range 2 { // two runs of the process
		w, err := audit.OpenFile(path, &audit.Options{Keys: codec.KeyRing})
		if err != nil {
			t.Fatal(err)
		}
		flows(t, codec, w, 1)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if res, err := audit.Verify(bytes.NewReader(b), ring, nil); err != nil || res.Lines != 8 {
		t.Fatalf("Verify after a restart: %+v, %v", res, err)
	}

	// logrotate: the file is moved, the Writer reopens the path.
	w, err := audit.OpenFile(path, &audit.Options{Keys: codec.KeyRing})
	if err != nil {
		t.Fatal(err)
	}
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	flows(t, codec, w, 1)
	w.Close()
	old, _ := os.ReadFile(rotated)
	cur, _ := os.ReadFile(path)
	if !bytes.Equal(old, b) || len(cur) == 0 {
		t.Fatalf("after Reopen: the old file changed or the new one is empty")
	}
	res, err := audit.Verify(bytes.NewReader(old), ring, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(bytes.NewReader(cur), ring, &audit.VerifyOptions{After: res.Last}); err != nil {
		t.Fatalf("the new file does not continue the old one: %v", err)
	}
	wantLineError(t, cur, ring, nil, 1, audit.ProblemBrokenLink) // not a chain's start
}

// TestTornTail pins that a Writer opened on a file that ends inside a
// line does not glue its line onto it: it ends the torn line, and Verify
// names that one.
func TestTornTail(t *testing.T) {
	ring := testRing(t)
	codec := reqstate.New(ring, nil)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.OpenFile(path, &audit.Options{Keys: codec.KeyRing})
	if err != nil {
		t.Fatal(err)
	}
	flows(t, codec, w, 1)
	w.Close()
	b, _ := os.ReadFile(path)
	if err := os.Truncate(path, int64(len(b)-40)); err != nil { // a crash mid-write of line 4
		t.Fatal(err)
	}
	if w, err = audit.OpenFile(path, &audit.Options{Keys: codec.KeyRing}); err != nil {
		t.Fatal(err)
	}
	flows(t, codec, w, 1)
	w.Close()
	b, _ = os.ReadFile(path)
	ls := lines(b)
	if len(ls) != 9 || len(ls[8]) != 0 { // 3 good, the torn one, 4 new, and the empty tail
		t.Fatalf("%d lines:\n%s", len(ls), b)
	}
	wantLineError(t, b, ring, nil, 4, audit.ProblemTruncated)
	// The lines after the torn one link to it: they are intact.
	if _, err := audit.Verify(bytes.NewReader(join(ls[4:])), ring, &audit.VerifyOptions{After: audit.LinkOf(bytes.TrimSuffix(ls[3], []byte("\n")))}); err != nil {
		t.Fatalf("the lines after the torn one: %v", err)
	}
}

// failing is a destination whose writes fail.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestRequired pins issue 29 item 4: a line that cannot be written is
// counted, and with Required the guard refuses the call (-32603 in the
// adapters: ErrAudit).
func TestRequired(t *testing.T) {
	ring := testRing(t)
	codec := reqstate.New(ring, nil)
	ctx := context.Background()
	r := &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", Arguments: []byte(`{}`)}
	for _, required := range []bool{false, true} {
		var failures int
		w := audit.NewWriter(failing{}, "", &audit.Options{Keys: codec.KeyRing, Required: required, OnError: func(error) { failures++ }})
		g := mrtr.New(codec, &mrtr.Options{Auditor: w})
		f, err := g.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Pause(nil, "confirm")
		if required != errors.Is(err, mrtr.ErrAudit) {
			t.Fatalf("required %v: Pause: %v", required, err)
		}
		f.End(ctx, err)
		if f, err = g.Begin(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := f.Finish(ctx, mrtr.OutcomeComplete, 0); required != errors.Is(err, mrtr.ErrAudit) {
			t.Fatalf("required %v: Finish: %v", required, err)
		}
		f.End(ctx, nil)
		if failures != 2+btoi(required) {
			t.Fatalf("required %v: %d failures counted, want %d", required, failures, 2+btoi(required))
		}
	}
	// An accepted resume that is not recorded runs nothing and releases
	// its token: the same resume goes through once the trail is back.
	store := replay.NewMemory(nil)
	var buf bytes.Buffer
	g := mrtr.New(codec, &mrtr.Options{Store: store, Auditor: audit.NewWriter(&buf, "", &audit.Options{Keys: codec.KeyRing})})
	f, _ := g.Begin(ctx, r)
	tok, _ := f.Pause(nil, "confirm")
	f.End(ctx, nil)
	r.RequestState = tok
	bad := mrtr.New(codec, &mrtr.Options{Store: store, Auditor: audit.NewWriter(failing{}, "", &audit.Options{Keys: codec.KeyRing, Required: true})})
	if _, err := bad.Begin(ctx, r); !errors.Is(err, mrtr.ErrAudit) {
		t.Fatalf("resume with a failing trail: %v", err)
	}
	if f, err := g.Begin(ctx, r); err != nil {
		t.Fatalf("the resume after the failed one: %v", err)
	} else {
		f.End(ctx, nil)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// flaky is a destination whose next write fails when fail is set.
type flaky struct {
	bytes.Buffer
	fail bool
}

func (f *flaky) Write(p []byte) (int, error) {
	if f.fail {
		f.fail = false
		return 0, errors.New("disk full")
	}
	return f.Buffer.Write(p)
}

// TestLostLineShows pins that a line whose write failed is not silently
// missing: the next line written links to it, and Verify names the gap.
func TestLostLineShows(t *testing.T) {
	ring := testRing(t)
	var dst flaky
	w := audit.NewWriter(&dst, "", &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	for i, fail := range []bool{false, true, false} {
		dst.fail = fail
		if err := w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"}); (err != nil) != fail {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	wantLineError(t, dst.Bytes(), ring, nil, 2, audit.ProblemBrokenLink)
}

// TestConcurrentWriters pins that lines written at once by many calls
// form one chain, in the file's order.
func TestConcurrentWriters(t *testing.T) {
	ring := testRing(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.OpenFile(path, &audit.Options{Keys: func() *reqstate.KeyRing { return ring }})
	if err != nil {
		t.Fatal(err)
	}
	const n, each = 8, 50
	errs := make(chan error, n*each)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for j := range each {
				errs <- w.Write(&audit.Line{Event: audit.EventCompleted, Round: i, RequestID: strconv.Itoa(j), Outcome: "complete"})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	b, _ := os.ReadFile(path)
	if res, err := audit.Verify(bytes.NewReader(b), ring, nil); err != nil || res.Lines != n*each {
		t.Fatalf("Verify: %+v %v, want %d lines", res, err, n*each)
	}
}

// gated is a destination whose first write blocks until gate is closed:
// a slow disk.
type gated struct {
	gate   chan struct{}
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (g *gated) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	first := g.writes == 1
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

// TestGroupCommit pins the bound on a slow disk: the lines of calls that
// queue while a write is in flight go out together in one next write,
// so none waits for more than the write in flight and its own.
func TestGroupCommit(t *testing.T) {
	ring := testRing(t)
	var queued atomic.Int32 // lines encoded: Keys is read once per line, under the lock
	dst := &gated{gate: make(chan struct{})}
	w := audit.NewWriter(dst, "", &audit.Options{Keys: func() *reqstate.KeyRing { queued.Add(1); return ring }})
	const n = 6
	errs := make(chan error, n)
	write := func() { errs <- w.Write(&audit.Line{Event: audit.EventCompleted, Outcome: "complete"}) }
	go write()
	for queued.Load() < 1 {
		runtime.Gosched()
	}
	for range n - 1 {
		go write()
	}
	for deadline := time.Now().Add(10 * time.Second); queued.Load() < n; runtime.Gosched() { // every line queued behind the blocked write
		if time.Now().After(deadline) { // a bound against a hang, not a timing
			close(dst.gate)
			t.Fatalf("%d of %d lines queued while a write was in flight: the writers wait for it instead", queued.Load(), n)
		}
	}
	close(dst.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if dst.writes != 2 {
		t.Fatalf("%d writes for %d lines queued behind one: want 2 (group commit)", dst.writes, n-1)
	}
	if res, err := audit.Verify(bytes.NewReader(dst.buf.Bytes()), ring, nil); err != nil || res.Lines != n {
		t.Fatalf("Verify: %+v %v", res, err)
	}
}
