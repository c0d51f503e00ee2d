package reqstate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"
)

// countingReader is a deterministic randomness source for tests: the
// SHA-256 of a seed and a counter, block after block.
type countingReader struct {
	seed string
	n    uint64
	buf  []byte
}

func (r *countingReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) {
		var in [8]byte
		binary.BigEndian.PutUint64(in[:], r.n)
		r.n++
		sum := sha256.Sum256(append([]byte(r.seed), in[:]...))
		r.buf = append(r.buf, sum[:]...)
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func testKey(t testing.TB, id string, fill byte) Key {
	t.Helper()
	k := Key{ID: id}
	for i := range k.Secret {
		k.Secret[i] = fill + byte(i)
	}
	return k
}

func testRing(t testing.TB, keys ...Key) *KeyRing {
	t.Helper()
	r, err := NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var testTime = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func testBinding() Binding {
	return Binding{
		Method:          "tools/call",
		ProtocolVersion: "2026-07-28",
		Target:          "deploy",
		ServerID:        "mrtr-test",
		Principal:       Principal{Issuer: "https://issuer.example", Subject: "alice"},
	}
}

func testState(t testing.TB) *State {
	t.Helper()
	h, err := HashArguments([]byte(`{"service":"api","env":"production"}`))
	if err != nil {
		t.Fatal(err)
	}
	return &State{
		Continuation: json.RawMessage(`{"service":"api","env":"production","step":"confirm"}`),
		Round:        1,
		IssuedAt:     testTime,
		ExpiresAt:    testTime.Add(5 * time.Minute),
		FlowID:       ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ArgsHash:     h,
		Asked:        []string{"confirm"},
	}
}
