package audit_test

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

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
		got := func() []audit.Checkpoint { mu.Lock(); defer mu.Unlock(); return append([]audit.Checkpoint(nil), cps...) }
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
