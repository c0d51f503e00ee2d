package reqstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// codecCase is one configuration the contract suite runs against.
type codecCase struct {
	name string
	// seal is the codec that issues tokens; open the one that opens them
	// (the same codec, or another node with the same ring).
	seal, open Codec
	// other opens with a ring that does not hold the sealing key.
	other Codec
	// maxLen is the open codec's token cap.
	maxLen int
}

func codecCases(t *testing.T) []codecCase {
	k1 := testKey(t, "k1", 1)
	k2 := testKey(t, "k2", 2)
	k3 := testKey(t, "k3", 3)
	one := New(testRing(t, k1), nil)
	return []codecCase{
		{name: "one-key", seal: one, open: one, other: New(testRing(t, k2), nil), maxLen: DefaultMaxTokenLen},
		{name: "two-keys", seal: New(testRing(t, k1, k2), nil), open: New(testRing(t, k1, k2), nil),
			other: New(testRing(t, k3, k2), nil), maxLen: DefaultMaxTokenLen},
		{name: "other-node-secondary", seal: New(testRing(t, k2, k1), nil), open: New(testRing(t, k1, k2), nil),
			other: New(testRing(t, k1, k3), nil), maxLen: DefaultMaxTokenLen},
		{name: "small-cap", seal: New(testRing(t, k1), &Options{MaxTokenLen: 1024}),
			open: New(testRing(t, k1), &Options{MaxTokenLen: 1024}), other: New(testRing(t, k3), &Options{MaxTokenLen: 1024}), maxLen: 1024},
		{name: "deterministic-rand", seal: New(testRing(t, k1), &Options{Rand: &countingReader{seed: "c"}}),
			open: New(testRing(t, k1), nil), other: New(testRing(t, k2), nil), maxLen: DefaultMaxTokenLen},
	}
}

func TestCodecContract(t *testing.T) {
	for _, cc := range codecCases(t) {
		t.Run(cc.name, func(t *testing.T) { runContract(t, cc) })
	}
}

func mustSeal(t *testing.T, c Codec, b Binding, s *State) string {
	t.Helper()
	tok, err := c.Seal(b, s)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return tok
}

func wantInvalid(t *testing.T, c Codec, b Binding, tok, what string) {
	t.Helper()
	s, err := c.Open(b, tok)
	if err != ErrInvalid || s != nil { // the exact sentinel, not merely wrapping it
		t.Fatalf("%s: Open = (%v, %v), want (nil, ErrInvalid)", what, s, err)
	}
}

func runContract(t *testing.T, cc codecCase) {
	b := testBinding()

	t.Run("RoundTrip", func(t *testing.T) {
		in := testState(t)
		tok := mustSeal(t, cc.seal, b, in)
		if in.JTI.IsZero() {
			t.Fatal("Seal did not fill JTI")
		}
		got, err := cc.open.Open(b, tok)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
		}
	})

	t.Run("RoundTripShapes", func(t *testing.T) {
		for i, s := range []*State{
			{IssuedAt: testTime, ExpiresAt: testTime.Add(time.Millisecond)},
			{Round: 0, IssuedAt: testTime, ExpiresAt: testTime.Add(time.Hour), Continuation: json.RawMessage(`null`)},
			{Round: maxRound, IssuedAt: testTime, ExpiresAt: testTime.Add(time.Hour), Continuation: json.RawMessage(`"x"`),
				Asked: []string{"", "a", strings.Repeat("k", 300), "\x00.\xff"}},
			{Round: 300, IssuedAt: time.UnixMilli(-5).UTC(), ExpiresAt: time.UnixMilli(1 << 50).UTC(), Continuation: json.RawMessage(`[1,2,{"a":[]}]`)},
		} {
			tok := mustSeal(t, cc.seal, b, s)
			got, err := cc.open.Open(b, tok)
			if err != nil {
				t.Fatalf("shape %d: Open: %v", i, err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Fatalf("shape %d:\n got %+v\nwant %+v", i, got, s)
			}
		}
	})

	t.Run("FreshNonceAndJTI", func(t *testing.T) {
		a, b2 := testState(t), testState(t)
		ta, tb := mustSeal(t, cc.seal, b, a), mustSeal(t, cc.seal, b, b2)
		if ta == tb || a.JTI == b2.JTI {
			t.Fatal("two seals of the same state gave the same token or jti")
		}
	})

	t.Run("FlipEachBit", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		raw := []byte(tok)
		for i := range raw {
			for bit := range 8 {
				raw[i] ^= 1 << bit
				wantInvalid(t, cc.open, b, string(raw), fmt.Sprintf("byte %d bit %d", i, bit))
				raw[i] ^= 1 << bit
			}
		}
	})

	t.Run("Truncate", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		for n := range len(tok) {
			wantInvalid(t, cc.open, b, tok[:n], fmt.Sprintf("first %d bytes", n))
		}
	})

	t.Run("Extend", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		for _, suffix := range []string{"A", "AA", "AAA", "AAAA", "=", "==", ".", "-TAMPERED", "\n", "\r\n", " ", "\x00"} {
			wantInvalid(t, cc.open, b, tok+suffix, fmt.Sprintf("suffix %q", suffix))
			wantInvalid(t, cc.open, b, suffix+tok, fmt.Sprintf("prefix %q", suffix))
		}
		// A newline inside the body would be skipped by a lax decoder.
		mid := len(tok) - 10
		wantInvalid(t, cc.open, b, tok[:mid]+"\n"+tok[mid:], "inner newline")
	})

	t.Run("NonCanonicalBase64", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		dot := strings.LastIndexByte(tok, '.')
		head, body := tok[:dot+1], tok[dot+1:]
		std := strings.NewReplacer("-", "+", "_", "/").Replace(body)
		if std != body {
			wantInvalid(t, cc.open, b, head+std, "standard alphabet")
		}
		for pad := ""; len(body+pad)%4 != 0; pad += "=" {
			wantInvalid(t, cc.open, b, head+body+pad+"=", "padding")
		}
		// Non-zero trailing bits in the last character.
		last := body[len(body)-1]
		for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
			if c != last {
				wantInvalid(t, cc.open, b, head+body[:len(body)-1]+string(c), "last character changed")
			}
		}
	})

	t.Run("WrongBinding", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		for name, change := range map[string]func(*Binding){
			"method":    func(b *Binding) { b.Method = "prompts/get" },
			"version":   func(b *Binding) { b.ProtocolVersion = "2025-11-25" },
			"target":    func(b *Binding) { b.Target = "transfer" },
			"server":    func(b *Binding) { b.ServerID = "other" },
			"issuer":    func(b *Binding) { b.Principal.Issuer = "https://evil.example" },
			"subject":   func(b *Binding) { b.Principal.Subject = "mallory" },
			"anonymous": func(b *Binding) { b.Principal = Principal{} },
			"empty":     func(b *Binding) { *b = Binding{} },
		} {
			other := b
			change(&other)
			wantInvalid(t, cc.open, other, tok, name)
		}
		anon := b
		anon.Principal = Principal{}
		atok := mustSeal(t, cc.seal, anon, testState(t))
		wantInvalid(t, cc.open, b, atok, "anonymous token used by a principal")
	})

	t.Run("WrongKey", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		wantInvalid(t, cc.other, b, tok, "ring without the sealing key")
		// Same key id, different secret.
		kid := strings.Split(tok, ".")[1]
		impostor := New(testRing(t, testKey(t, kid, 99)), nil)
		wantInvalid(t, impostor, b, tok, "same id, other secret")
	})

	t.Run("KeyIDSwap", func(t *testing.T) {
		tok := mustSeal(t, cc.seal, b, testState(t))
		parts := strings.SplitN(tok, ".", 3)
		for _, kid := range []string{"k1", "k2", "k3", "", "K1", strings.Repeat("k", 33), "k1.k2"} {
			if kid != parts[1] {
				wantInvalid(t, cc.open, b, parts[0]+"."+kid+"."+parts[2], "kid "+kid)
			}
		}
		for _, v := range []string{"v0", "v2", "V1", "", "v1v1"} {
			wantInvalid(t, cc.open, b, v+"."+parts[1]+"."+parts[2], "version "+v)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		for _, tok := range []string{"", ".", "..", "v1", "v1.", "v1..", "v1.k1.", "v1.k1", "\x00"} {
			wantInvalid(t, cc.open, b, tok, fmt.Sprintf("%q", tok))
		}
	})

	t.Run("Oversize", func(t *testing.T) {
		s := testState(t)
		s.Continuation = json.RawMessage(`"` + strings.Repeat("x", cc.maxLen) + `"`)
		if _, err := cc.seal.Seal(b, s); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Seal of an oversize state: %v, want ErrTooLarge", err)
		}
		tok := mustSeal(t, cc.seal, b, testState(t))
		wantInvalid(t, cc.open, b, tok+strings.Repeat("A", cc.maxLen), "over the cap")
		wantInvalid(t, cc.open, b, strings.Repeat("v1.k1.", cc.maxLen), "repeated prefix")
	})

	t.Run("Garbage", func(t *testing.T) {
		for _, tok := range []string{"v1.k1." + strings.Repeat("A", 200), "v1.k1." + strings.Repeat("_", 201),
			"\xff\xfe\xfd", "v1.k1.☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃☃",
			`{"round":1}`} {
			wantInvalid(t, cc.open, b, tok, "garbage")
		}
	})

	t.Run("BadState", func(t *testing.T) {
		for name, change := range map[string]func(*State){
			"negative round": func(s *State) { s.Round = -1 },
			"no issued-at":   func(s *State) { s.IssuedAt = time.Time{} },
			"no expiry":      func(s *State) { s.ExpiresAt = time.Time{} },
			"inverted":       func(s *State) { s.ExpiresAt = s.IssuedAt.Add(-time.Second) },
			"equal":          func(s *State) { s.ExpiresAt = s.IssuedAt },
			"bad json":       func(s *State) { s.Continuation = json.RawMessage(`{"a":`) },
		} {
			s := testState(t)
			change(s)
			if _, err := cc.seal.Seal(b, s); !errors.Is(err, ErrBadState) {
				t.Errorf("%s: Seal = %v, want ErrBadState", name, err)
			}
		}
	})
}

func TestStateCheck(t *testing.T) {
	s := testState(t)
	leeway := 2 * time.Second
	for _, tc := range []struct {
		name string
		now  time.Time
		want error
	}{
		{"at issue", s.IssuedAt, nil},
		{"just before expiry", s.ExpiresAt, nil},
		{"within leeway after expiry", s.ExpiresAt.Add(leeway), nil},
		{"expired", s.ExpiresAt.Add(leeway + time.Millisecond), ErrExpired},
		{"issued slightly in the future", s.IssuedAt.Add(-leeway), nil},
		{"issued in the future", s.IssuedAt.Add(-leeway - time.Millisecond), ErrNotYetValid},
	} {
		if err := s.Check(tc.now, leeway); err != tc.want {
			t.Errorf("%s: Check = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestRotation is the rotation table: a token sealed under one key, opened
// with rings at each stage of a rotation. Run one cell with, for example,
// go test -run 'Rotation/old/after_removal'.
func TestRotation(t *testing.T) {
	old, cur, next := testKey(t, "old", 10), testKey(t, "cur", 20), testKey(t, "next", 30)
	rings := []struct {
		stage string
		keys  []Key
	}{
		{"before", []Key{cur, old}},
		{"new_added_second", []Key{cur, next, old}},
		{"new_promoted", []Key{next, cur, old}},
		{"after_removal", []Key{next, cur}},
		{"only_new", []Key{next}},
	}
	want := map[string]map[string]bool{ // sealed under -> stage -> opens
		"old":  {"before": true, "new_added_second": true, "new_promoted": true, "after_removal": false, "only_new": false},
		"cur":  {"before": true, "new_added_second": true, "new_promoted": true, "after_removal": true, "only_new": false},
		"next": {"before": false, "new_added_second": true, "new_promoted": true, "after_removal": true, "only_new": true},
	}
	b := testBinding()
	for _, sealer := range []Key{old, cur, next} {
		tok := mustSeal(t, New(testRing(t, sealer), nil), b, testState(t))
		for _, r := range rings {
			t.Run(sealer.ID+"/"+r.stage, func(t *testing.T) {
				_, err := New(testRing(t, r.keys...), nil).Open(b, tok)
				if ok := want[sealer.ID][r.stage]; ok && err != nil {
					t.Fatalf("Open = %v, want success", err)
				} else if !ok && err != ErrInvalid {
					t.Fatalf("Open = %v, want ErrInvalid", err)
				}
			})
		}
	}
	// The primary always seals: after promotion, new tokens carry "next".
	tok := mustSeal(t, New(testRing(t, next, cur, old), nil), b, testState(t))
	if !strings.HasPrefix(tok, "v1.next.") {
		t.Fatalf("token sealed after promotion does not name the new key")
	}
}

// TestBindingEncodingInjective checks that bindings differing in any way,
// including fields that contain NUL bytes, separators or length-like
// bytes, never produce the same associated data.
func TestBindingEncodingInjective(t *testing.T) {
	tricky := []string{"", "a", "a\x00", "\x00a", "\x01", "\x01a", ".", "a.b", "tools/call", "\x00\x00", "ab", "b"}
	var bindings []Binding
	for _, f1 := range tricky {
		for _, f2 := range tricky {
			bindings = append(bindings,
				Binding{Method: f1, Target: f2},
				Binding{Method: f1 + f2},
				Binding{ProtocolVersion: f1, ServerID: f2},
				Binding{Target: f1, Principal: Principal{Issuer: f2}},
				Binding{ServerID: f1, Principal: Principal{Subject: f2}},
				Binding{Principal: Principal{Issuer: f1, Subject: f2}},
			)
		}
	}
	type keyed struct {
		kid string
		b   Binding
	}
	seen := map[string]keyed{}
	for _, b := range bindings {
		for _, kid := range []string{"k", "k1"} {
			aad := appendAAD(nil, Version, kid, &b)
			if prev, ok := seen[string(aad)]; ok && prev != (keyed{kid, b}) {
				t.Fatalf("%+v and %+v encode to the same bytes", prev, keyed{kid, b})
			}
			seen[string(aad)] = keyed{kid, b}
			if n := aadLen(kid, &b); len(aad) > n {
				t.Fatalf("aadLen %d < actual %d", n, len(aad))
			}
		}
	}
	// The anonymous principal differs from every identified one.
	anon := appendAAD(nil, Version, "k", &Binding{})
	ident := appendAAD(nil, Version, "k", &Binding{Principal: Principal{Subject: "\x00"}})
	if bytes.Equal(anon, ident) {
		t.Fatal("anonymous and identified principals encode alike")
	}
}

func TestNewPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"nil ring":     func() { New(nil, nil) },
		"empty ring":   func() { New(&KeyRing{}, nil) },
		"negative cap": func() { New(testRing(t, testKey(t, "k", 1)), &Options{MaxTokenLen: -1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestRandFailure(t *testing.T) {
	c := New(testRing(t, testKey(t, "k", 1)), &Options{Rand: bytes.NewReader(nil)})
	if _, err := c.Seal(testBinding(), testState(t)); err == nil {
		t.Fatal("Seal succeeded with a failing randomness source")
	}
}

func TestOpenAllocationBounded(t *testing.T) {
	c := New(testRing(t, testKey(t, "k1", 1)), nil)
	b := testBinding()
	// An oversize token is rejected without allocating.
	huge := "v1.k1." + strings.Repeat("A", 100<<20)
	if n := testing.AllocsPerRun(5, func() { _, _ = c.Open(b, huge) }); n != 0 {
		t.Fatalf("Open of a 100 MB token allocated %v times", n)
	}
	// An unknown key id is rejected without allocating.
	unknown := "v1.zz." + strings.Repeat("A", 1000)
	if n := testing.AllocsPerRun(5, func() { _, _ = c.Open(b, unknown) }); n != 0 {
		t.Fatalf("Open with an unknown key id allocated %v times", n)
	}
}
