package audit_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

// writeN writes n completed lines to w.
func writeN(t *testing.T, w *audit.Writer, n int) {
	t.Helper()
	for i := range n {
		if err := w.Write(&audit.Line{Event: audit.EventCompleted, RequestID: strconv.Itoa(i), Outcome: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReopenUnderLoadKeepsChain pins issue 35 item 4: a SIGHUP (Reopen)
// while four callers write, on a file nobody touched, leaves one chain
// that verifies, every time (the review saw 161 of 200 trails fail).
func TestReopenUnderLoadKeepsChain(t *testing.T) {
	ring := testRing(t)
	keys := func() *reqstate.KeyRing { return ring }
	dir := t.TempDir()
	const trails, writers, each = 200, 4, 10
	for i := range trails {
		path := filepath.Join(dir, "audit"+strconv.Itoa(i)+".jsonl")
		w, err := audit.OpenFile(path, &audit.Options{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, writers*each)
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() {
				<-start
				for j := range each {
					errs <- w.Write(&audit.Line{Event: audit.EventCompleted, Round: g, RequestID: strconv.Itoa(j), Outcome: "complete"})
				}
			})
		}
		close(start)
		for range 3 {
			if err := w.Reopen(); err != nil {
				t.Fatal(err)
			}
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
		if res, err := audit.Verify(bytes.NewReader(b), ring, nil); err != nil || res.Lines != writers*each {
			t.Fatalf("trail %d of %d: Verify after a reopen under %d writers: %+v, %v", i+1, trails, writers, res, err)
		}
	}
}

// TestCutThenReopenShows pins issue 35 item 5's SIGHUP case: lines cut
// from the end of a trail, then a SIGHUP (Reopen) on the same file: the
// Writer goes on with the chain it holds, so the next line's link is
// broken and Verify names it. (A restart on the cut file still goes on
// from its last line and verifies clean: the signed checkpoints of the
// next audit issue close that case.)
func TestCutThenReopenShows(t *testing.T) {
	ring := testRing(t)
	keys := func() *reqstate.KeyRing { return ring }
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.OpenFile(path, &audit.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeN(t, w, 10)
	b, _ := os.ReadFile(path)
	ls := lines(b)
	if err := os.Truncate(path, int64(len(join(ls[:7])))); err != nil { // lines 8-10 deleted, the same inode
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 2)
	b, _ = os.ReadFile(path)
	wantLineError(t, b, ring, nil, 8, audit.ProblemBrokenLink)
}

// TestReopenCases pins which chain Reopen goes on with: the same file
// keeps the chain held in memory; a moved-away file and a new empty one
// go on with it too (one chain over both files); another file that is
// not empty goes on from its own last line, with a warning.
func TestReopenCases(t *testing.T) {
	ring := testRing(t)
	keys := func() *reqstate.KeyRing { return ring }
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	var logs bytes.Buffer
	w, err := audit.OpenFile(path, &audit.Options{Keys: keys, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeN(t, w, 2)
	held := w.Prev()
	if err := w.Reopen(); err != nil || w.Prev() != held {
		t.Fatalf("Reopen of the same file: %v, prev %s, want %s", err, w.Prev(), held)
	}

	// Another trail, not empty, moved to the path.
	other := filepath.Join(dir, "other.jsonl")
	ow, err := audit.OpenFile(other, &audit.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, ow, 3)
	ow.Close()
	otherPrev := ow.Prev()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil || w.Prev() != otherPrev {
		t.Fatalf("Reopen onto another trail: %v, prev %s, want its last line's link %s", err, w.Prev(), otherPrev)
	}
	if !strings.Contains(logs.String(), "another file that is not empty") {
		t.Fatalf("no warning for another file: %s", logs.String())
	}
	writeN(t, w, 1)
	b, _ := os.ReadFile(path)
	if res, err := audit.Verify(bytes.NewReader(b), ring, nil); err != nil || res.Lines != 4 {
		t.Fatalf("the other trail and the line after it: %+v, %v", res, err)
	}
	logs.Reset()

	// Rotation: a new empty file goes on with the chain; no warning.
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held = w.Prev()
	if err := w.Reopen(); err != nil || w.Prev() != held {
		t.Fatalf("Reopen onto an empty file: %v, prev %s, want %s", err, w.Prev(), held)
	}
	if logs.Len() != 0 {
		t.Fatalf("a warning for a rotation: %s", logs.String())
	}
	writeN(t, w, 1)
	b, _ = os.ReadFile(path)
	if _, err := audit.Verify(bytes.NewReader(b), ring, &audit.VerifyOptions{After: held}); err != nil {
		t.Fatalf("the new file: %v", err)
	}
}
