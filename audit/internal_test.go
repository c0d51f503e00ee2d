package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// katKey is the fixed ring key of the known answers: kid k1, secret the
// bytes 0 to 31.
func katKey() reqstate.Key {
	k := reqstate.Key{ID: "k1"}
	for i := range k.Secret {
		k.Secret[i] = byte(i)
	}
	return k
}

// TestKnownAnswers pins mutation survivor keys.go:36 with frozen vectors:
// the two keys derived from a fixed ring key, the arguments digest of a
// fixed hash and the MAC of fixed bytes. A change to any of them makes
// every trail written so far fail to verify: it goes with a new Schema.
// The values were checked against an independent HKDF-SHA256 (RFC 5869,
// empty salt) and HMAC-SHA256 computation.
func TestKnownAnswers(t *testing.T) {
	d := derive(katKey())
	for _, v := range []struct{ name, got, want string }{
		{"line key", hex.EncodeToString(d.line), "b6447d568afa6a0a49bdff12806b9f31fd11fbfa30947a3780196d55566aa940"},
		{"args key", hex.EncodeToString(d.args), "54e6469ae2b908b95719cf2380ab76b10db3bf8972a90b1f69df3ffe6793a547"},
	} {
		if v.got != v.want {
			t.Errorf("%s = %s, want %s", v.name, v.got, v.want)
		}
	}
	m := newMacs(d)
	h := reqstate.Hash(sha256.Sum256([]byte(`{"env":"production"}`)))
	if got, want := m.argsDigest(h), "hmac-sha256:jerxgHADOHTDz0E3hGOqdIGcOsKUrKSKmS5cfinrTKE"; got != want {
		t.Errorf("args digest = %s, want %s", got, want)
	}
	if got, want := string(m.lineMAC(nil, []byte(`{"schema":"mrtr.audit/v1"`))), "efiURx6dj_VP6si-AL6dL5MnQr8A7SnBj9dNrccnoNA"; got != want {
		t.Errorf("line MAC = %s, want %s", got, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestCloseDuringWrite pins mutation survivor writer.go:358 (the close
// deferred to the write in flight never done): Close while a line is
// being written closes the file once that write ends.
func TestCloseDuringWrite(t *testing.T) {
	ring, _ := reqstate.NewKeyRing(katKey())
	w, err := OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"), &Options{Keys: func() *reqstate.KeyRing { return ring }})
	if err != nil {
		t.Fatal(err)
	}
	f := w.file
	entered, gate := make(chan struct{}), make(chan struct{})
	w.mu.Lock()
	w.out = writerFunc(func(p []byte) (int, error) { close(entered); <-gate; return f.Write(p) }) // a slow disk
	w.mu.Unlock()
	done := make(chan error)
	go func() { done <- w.Write(&Line{Event: EventCompleted, Outcome: "complete"}) }()
	<-entered
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err != nil {
		t.Fatalf("closed under the write in flight: %v", err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("the line in flight at Close: %v", err)
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the file after the write in flight at Close ended: %v, want it closed", err)
	}
}

// TestReopenClosesOld pins mutation survivor writer.go:212 (the old
// file's close deferred, or done under a write): Reopen after a rotation
// closes the file it had, at once (it waits for the write in flight).
func TestReopenClosesOld(t *testing.T) {
	ring, _ := reqstate.NewKeyRing(katKey())
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := OpenFile(path, &Options{Keys: func() *reqstate.KeyRing { return ring }, Now: func() time.Time { return time.Unix(0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(&Line{Event: EventCompleted}); err != nil {
		t.Fatal(err)
	}
	old := w.file
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the old file after Reopen: %v, want it closed", err)
	}
	if w.file == old || w.out == io.Writer(old) {
		t.Fatal("Reopen kept the old file")
	}
}
