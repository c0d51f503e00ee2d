package reqstate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
)

// windowed returns k with the window [nb, na) (zero: open side).
func windowed(k Key, nb, na time.Time) Key {
	k.NotBefore, k.NotAfter = nb, na
	return k
}

func sealWith(t *testing.T, c *AESGCM) (string, error) {
	t.Helper()
	return c.Seal(testBinding(), testState(t))
}

func kidOf(tok string) string {
	rest := strings.TrimPrefix(tok, versionPrefix)
	return rest[:strings.IndexByte(rest, '.')]
}

func TestKeyWindowJSON(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	in := `{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-01T00:00:00Z","not_after":"2027-03-01T00:00:00+01:00"},` +
		`{"id":"b","secret":"` + secret[:len(secret)-4] + `BwY=","not_after":"2026-12-01T00:00:00.5Z"},{"id":"c","secret":"` + secret[:len(secret)-4] + `BwU="}]}`
	r, err := ParseKeyRing([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	k := r.Keys()
	if !k[0].NotBefore.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !k[0].NotAfter.Equal(time.Date(2027, 2, 28, 23, 0, 0, 0, time.UTC)) ||
		!k[1].NotBefore.IsZero() || !k[1].NotAfter.Equal(time.Date(2026, 12, 1, 0, 0, 0, 5e8, time.UTC)) ||
		!k[2].NotBefore.IsZero() || !k[2].NotAfter.IsZero() || !r.Windowed() {
		t.Fatalf("windows: %+v", k)
	}
	// Windows survive the key file round trip and show in the redacted forms.
	data, err := r.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyRing(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, bk := range back.Keys() {
		if !bk.NotBefore.Equal(k[i].NotBefore) || !bk.NotAfter.Equal(k[i].NotAfter) || bk.Secret != k[i].Secret {
			t.Fatalf("entry %d changed in a round trip: %v", i, bk)
		}
	}
	pub, _ := r.MarshalJSON()
	if want := `{"id":"a","not_before":"2026-12-01T00:00:00Z","not_after":"2027-03-01T00:00:00+01:00"}`; !strings.Contains(string(pub), want) {
		t.Fatalf("redacted ring %s lacks %s", pub, want)
	}
	// A ring without windows writes no window fields (files stay as they were).
	plain := testRing(t, testKey(t, "p", 1))
	if data, _ := plain.MarshalSecretJSON(); strings.Contains(string(data), "not_") || plain.Windowed() {
		t.Fatalf("plain ring: %s", data)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"not rfc3339", `{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-01"}]}`, `entry 0 (id "a"): not_before is not an RFC 3339 time`},
		{"secret as time", `{"keys":[{"id":"a","secret":"` + secret + `","not_after":"` + secret + `"}]}`, `entry 0 (id "a"): not_after is not an RFC 3339 time`},
		{"number", `{"keys":[{"id":"a","secret":"` + secret + `","not_after":5}]}`, `must be a string, not a number`},
		{"inverted", `{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-02T00:00:00Z","not_after":"2026-12-01T00:00:00Z"}]}`, `not_after 2026-12-01T00:00:00Z is not after not_before 2026-12-02T00:00:00Z`},
		{"empty window", `{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-01T00:00:00Z","not_after":"2026-12-01T00:00:00Z"}]}`, `is not after not_before`},
	} {
		_, err := ParseKeyRing([]byte(tc.in))
		if !errors.Is(err, ErrKeyRing) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSealingKeyRule(t *testing.T) {
	t0 := testTime
	a := windowed(testKey(t, "a", 1), time.Time{}, t0.Add(time.Hour))
	b := windowed(testKey(t, "b", 2), t0.Add(30*time.Minute), time.Time{})
	c := windowed(testKey(t, "c", 3), t0.Add(2*time.Hour), t0.Add(3*time.Hour))
	// File order decides among open windows: a is first while open.
	r := testRing(t, a, b)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{t0, "a"},
		{t0.Add(45 * time.Minute), "a"},        // both open: the first in file order
		{t0.Add(time.Hour - 1), "a"},           // the last instant of a's window
		{t0.Add(time.Hour), "b"},               // not_after is exclusive
		{t0.Add(1000 * time.Hour), "b"},        // b has no end
		{t0.Add(-1000 * time.Hour), "a"},       // a has no start
		{t0.Add(30*time.Minute - 1), "a"},      // b not yet
		{t0.Add(30 * time.Minute), "a"},        // b open, a still first
		{t0.Add(time.Hour + time.Second), "b"}, // a retired from sealing
	} {
		if got, ok := r.SealingKey(tc.at); !ok || got != tc.want {
			t.Errorf("at %v: %q %v, want %q", tc.at.Sub(t0), got, ok, tc.want)
		}
	}
	// b listed first seals only from its not_before.
	r = testRing(t, b, a)
	if got, _ := r.SealingKey(t0); got != "a" {
		t.Errorf("before b's window: %q", got)
	}
	if got, _ := r.SealingKey(t0.Add(30 * time.Minute)); got != "b" {
		t.Errorf("inside b's window: %q", got)
	}
	// A gap: nobody seals.
	r = testRing(t, a, c)
	if got, ok := r.SealingKey(t0.Add(90 * time.Minute)); ok {
		t.Errorf("gap between windows sealed with %q", got)
	}
	// No windows at all: the first key, always (the rule before windows).
	r = testRing(t, testKey(t, "x", 4), testKey(t, "y", 5))
	if got, ok := r.SealingKey(time.Time{}); !ok || got != "x" {
		t.Errorf("plain ring: %q %v", got, ok)
	}
}

// TestNotAfterStopsSealingAtTheBoundary: on a fake clock, key A seals up
// to the last instant before its not_after and never at it; B takes over
// exactly there; tokens sealed under A still open until A's not_after plus
// the grace, then A is retired and opens nothing.
func TestNotAfterStopsSealingAtTheBoundary(t *testing.T) {
	end := testTime.Add(time.Hour)
	clock := fakeclock.New(end.Add(-time.Nanosecond))
	a := windowed(testKey(t, "a", 1), time.Time{}, end)
	b := windowed(testKey(t, "b", 2), end, time.Time{})
	grace := 5*time.Minute + 5*time.Second
	c := New(testRing(t, a, b), &Options{Now: clock.Now, OpenGrace: grace})

	tokA, err := sealWith(t, c)
	if err != nil || kidOf(tokA) != "a" {
		t.Fatalf("before the boundary: %v, kid %q", err, kidOf(tokA))
	}
	clock.Advance(time.Nanosecond) // exactly not_after
	tokB, err := sealWith(t, c)
	if err != nil || kidOf(tokB) != "b" {
		t.Fatalf("at the boundary: %v, kid %q", err, kidOf(tokB))
	}
	// A still opens what it sealed, until not_after + grace.
	clock.Advance(grace - time.Nanosecond)
	if _, err := c.Open(testBinding(), tokA); err != nil {
		t.Fatalf("A within its grace: %v", err)
	}
	clock.Advance(time.Nanosecond)
	if _, err := c.Open(testBinding(), tokA); err != ErrInvalid {
		t.Fatalf("A after its grace: %v, want ErrInvalid", err)
	}
	if _, err := c.Open(testBinding(), tokB); err != nil {
		t.Fatalf("B: %v", err)
	}
	// Without a successor, sealing stops with a clear error and one log line.
	var logs bytes.Buffer
	clock = fakeclock.New(end)
	c = New(testRing(t, a), &Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		_, err = sealWith(t, c)
		if !errors.Is(err, ErrNoSealingKey) || !strings.Contains(err.Error(), "no key may seal now at 2026-11-30T09:00:00Z") {
			t.Fatalf("no sealing key: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "seal refused"); n != 1 || !strings.Contains(logs.String(), `keys="a [-, 2026-11-30T09:00:00Z)"`) {
		t.Fatalf("%d log lines for refused seals within a minute, want 1:\n%s", n, logs.String())
	}
	clock.Advance(time.Minute)
	sealWith(t, c)
	if n := strings.Count(logs.String(), "seal refused"); n != 2 {
		t.Fatalf("%d log lines after a minute, want 2", n)
	}
	if strings.Contains(logs.String(), base64.StdEncoding.EncodeToString(a.Secret[:])[:8]) {
		t.Fatal("a secret reached the log")
	}
}

// A key before its not_before does not seal but opens: a node whose clock
// runs ahead may already seal with it.
func TestNotBeforeOpensEarly(t *testing.T) {
	start := testTime.Add(time.Hour)
	ahead := New(testRing(t, testKey(t, "old", 1), windowed(testKey(t, "new", 2), start, time.Time{})),
		&Options{Now: func() time.Time { return start }})
	behind := New(testRing(t, windowed(testKey(t, "new", 2), start, time.Time{}), testKey(t, "old", 1)),
		&Options{Now: func() time.Time { return start.Add(-time.Second) }})
	// "old" first on the ahead node still wins: file order decides.
	tok, _ := sealWith(t, ahead)
	if kidOf(tok) != "old" {
		t.Fatalf("kid %q", kidOf(tok))
	}
	ahead2 := New(testRing(t, windowed(testKey(t, "new", 2), start, time.Time{}), testKey(t, "old", 1)),
		&Options{Now: func() time.Time { return start }})
	tok, _ = sealWith(t, ahead2)
	if kidOf(tok) != "new" {
		t.Fatalf("kid %q", kidOf(tok))
	}
	if _, err := behind.Open(testBinding(), tok); err != nil {
		t.Fatalf("a node behind cannot open a token of a key not yet valid on its clock: %v", err)
	}
	if tok, _ := sealWith(t, behind); kidOf(tok) != "old" {
		t.Fatalf("the node behind sealed with %q", kidOf(tok))
	}
}

// TestReloadKeepsFlowsInFlight: tokens sealed under A open after a
// reload that makes B primary (A kept second), and stop opening only once
// A leaves the ring; counts carry over by id; a key id cannot come back
// with another secret.
func TestReloadKeepsFlowsInFlight(t *testing.T) {
	a, b := testKey(t, "a", 1), testKey(t, "b", 2)
	c := New(testRing(t, a), nil)
	var toks []string
	for range 3 {
		tok, err := sealWith(t, c)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	if err := c.SetKeyRing(testRing(t, b, a)); err != nil {
		t.Fatal(err)
	}
	if c.KeyRing().Primary() != "b" {
		t.Fatal("reload did not take")
	}
	for _, tok := range toks {
		if _, err := c.Open(testBinding(), tok); err != nil {
			t.Fatalf("token under A after the reload: %v", err)
		}
	}
	tokB, _ := sealWith(t, c)
	if kidOf(tokB) != "b" {
		t.Fatalf("sealed with %q after the reload", kidOf(tokB))
	}
	if got := c.Seals(); got["a"] != 3 || got["b"] != 1 {
		t.Fatalf("seals %v", got)
	}
	evil := testKey(t, "a", 9)
	if err := c.SetKeyRing(testRing(t, b, evil)); !errors.Is(err, ErrKeyRing) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("a new secret under an old id: %v", err)
	}
	if c.KeyRing().IDs()[1] != "a" || c.KeyRing().Keys()[1].Secret != a.Secret {
		t.Fatal("a refused ring replaced the current one")
	}
	// A dropped: its tokens are invalid, B's open; A's count stays.
	if err := c.SetKeyRing(testRing(t, b)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(testBinding(), toks[0]); err != ErrInvalid {
		t.Fatalf("token under a dropped key: %v", err)
	}
	if _, err := c.Open(testBinding(), tokB); err != nil {
		t.Fatal(err)
	}
	if got := c.Seals(); got["a"] != 3 {
		t.Fatalf("seals %v", got)
	}
}

// Seal and Open keep working, with no torn state, while the ring is
// swapped under them (run with -race).
func TestReloadConcurrent(t *testing.T) {
	a, b := testKey(t, "a", 1), testKey(t, "b", 2)
	rings := []*KeyRing{testRing(t, a, b), testRing(t, b, a)}
	c := New(rings[0], nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for range 200 {
				tok, err := c.Seal(testBinding(), testState(t))
				if err == nil {
					_, err = c.Open(testBinding(), tok)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 200 {
		if err := c.SetKeyRing(rings[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := c.Seals(); s["a"]+s["b"] != 800 {
		t.Fatalf("seals %v, want 800 in all", s)
	}
}

// The seal-count warning fires at the threshold and each multiple, with
// the key id, through the hook and the log.
func TestSealWarning(t *testing.T) {
	var logs bytes.Buffer
	type fired struct {
		kid string
		n   uint64
	}
	var got []fired
	c := New(testRing(t, testKey(t, "k", 1)), &Options{SealWarn: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnSealWarn: func(kid string, n uint64) { got = append(got, fired{kid, n}) }})
	for range 7 {
		if _, err := sealWith(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != (fired{"k", 3}) || got[1] != (fired{"k", 6}) {
		t.Fatalf("warnings %v, want k at 3 and 6", got)
	}
	if n := strings.Count(logs.String(), "key_id=k seals="); n != 2 {
		t.Fatalf("%d warning lines:\n%s", n, logs.String())
	}
	// Negative never warns; zero is the default.
	c = New(testRing(t, testKey(t, "k", 1)), &Options{SealWarn: -1, OnSealWarn: func(string, uint64) { t.Fatal("warned") }})
	sealWith(t, c)
	if c := New(testRing(t, testKey(t, "k", 1)), nil); c.warn != DefaultSealWarn {
		t.Fatalf("default warn %d", c.warn)
	}
}
