package reqstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// fuzzCodec seals and opens with fixed keys; the ring holds two so both
// the primary and a secondary are reachable.
func fuzzCodec(t testing.TB) *AESGCM {
	return New(testRing(t, testKey(t, "k1", 1), testKey(t, "k2", 2)), &Options{MaxTokenLen: 4096})
}

func addTokenSeeds(f *testing.F) {
	c := fuzzCodec(f)
	f.Add(mustSealTB(f, c, testBinding(), testState(f)))
	f.Add("")
	f.Add("v1.k1.")
	f.Add("v1.k2.AAAA")
	f.Add("v1.k1." + string(bytes.Repeat([]byte("A"), 200)))
}

func mustSealTB(t testing.TB, c Codec, b Binding, s *State) string {
	t.Helper()
	tok, err := c.Seal(b, s)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// FuzzOpen: Open never panics, and fails only with ErrInvalid.
func FuzzOpen(f *testing.F) {
	addTokenSeeds(f)
	c := fuzzCodec(f)
	b := testBinding()
	f.Fuzz(func(t *testing.T, tok string) {
		s, err := c.Open(b, tok)
		if err != nil && err != ErrInvalid {
			t.Fatalf("Open returned %v, not ErrInvalid", err)
		}
		if err == nil && s == nil {
			t.Fatal("Open returned neither state nor error")
		}
	})
}

// FuzzMalleability: whatever opens is byte-identical to a token we sealed.
// The fuzzer mutates a real token (as a byte string and by splicing); any
// mutation that still opens is a forgery.
func FuzzMalleability(f *testing.F) {
	// Deterministic randomness: the fuzzing workers are separate processes
	// and must all hold the same original token.
	c := New(testRing(f, testKey(f, "k1", 1), testKey(f, "k2", 2)), &Options{Rand: &countingReader{seed: "malleability"}})
	b := testBinding()
	tok := mustSealTB(f, c, b, testState(f))
	f.Add([]byte(tok), 0, "")
	f.Add([]byte(tok), len(tok), "A")
	f.Add([]byte(tok), 10, "\n")
	f.Fuzz(func(t *testing.T, mutated []byte, at int, insert string) {
		if at >= 0 && at <= len(mutated) {
			mutated = append(mutated[:at:at], append([]byte(insert), mutated[at:]...)...)
		}
		if _, err := c.Open(b, string(mutated)); err == nil && string(mutated) != tok {
			t.Fatalf("a token that was never sealed opened: %q", mutated)
		}
	})
}

// FuzzRoundTrip: any sealable state opens to itself, under any binding.
func FuzzRoundTrip(f *testing.F) {
	f.Add("tools/call", "2026-07-28", "deploy", "srv", "iss", "sub", 1, int64(0), int64(1000), []byte(`{"a":1}`), "confirm", "guess")
	f.Add("", "", "", "", "", "", 0, int64(-5), int64(-4), []byte(nil), "", "")
	f.Fuzz(func(t *testing.T, method, version, target, server, iss, sub string, round int, iat, ttl int64, cont []byte, k1, k2 string) {
		c := fuzzCodec(t)
		b := Binding{Method: method, ProtocolVersion: version, Target: target, ServerID: server, Principal: Principal{iss, sub}}
		s := &State{Round: round, IssuedAt: time.UnixMilli(iat).UTC(), ExpiresAt: time.UnixMilli(iat + ttl).UTC(),
			Asked: []string{k1, k2}}
		if len(cont) > 0 {
			s.Continuation = cont
		}
		tok, err := c.Seal(b, s)
		if err != nil {
			if !errors.Is(err, ErrBadState) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Seal: unexpected error %v", err)
			}
			return
		}
		got, err := c.Open(b, tok)
		if err != nil {
			t.Fatalf("Open of a fresh token: %v", err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
		}
	})
}

// FuzzDecodePayload: the payload decoder never panics on any bytes, even
// though in production it only sees authenticated ones, and what it
// accepts survives re-encoding.
func FuzzDecodePayload(f *testing.F) {
	f.Add(testState(f).appendPayload(nil))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		s, ok := decodePayload(p)
		if !ok {
			return
		}
		again, ok := decodePayload(s.appendPayload(nil))
		if !ok || !reflect.DeepEqual(again, s) {
			t.Fatalf("decoded state does not survive re-encoding: %+v", s)
		}
	})
}

// FuzzCanonicalize: never panics; output is valid JSON, a fixed point, and
// means the same as the input.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.50,"x"],"a":{"\u00e9":null}}`, `"\ud83d\ude00"`, `1e21`, `[[[]]]`, `-0.0`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrJSON) {
				t.Fatalf("error %v does not wrap ErrJSON", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) == nil && json.Unmarshal(out, &b) == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

// FuzzBindingInjective: two different bindings never share associated data.
func FuzzBindingInjective(f *testing.F) {
	f.Add("a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "")
	f.Add("a\x00", "b", "", "", "", "", "a", "\x00b", "", "", "", "")
	f.Fuzz(func(t *testing.T, m1, v1, t1, s1, i1, u1, m2, v2, t2, s2, i2, u2 string) {
		b1 := Binding{m1, v1, t1, s1, Principal{i1, u1}}
		b2 := Binding{m2, v2, t2, s2, Principal{i2, u2}}
		if b1 != b2 && bytes.Equal(appendAAD(nil, Version, "k", &b1), appendAAD(nil, Version, "k", &b2)) {
			t.Fatalf("%+v and %+v share associated data", b1, b2)
		}
	})
}
