package reqstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strconv"
	"strings"
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
// means the same as the input, every number with its exact decimal value
// (issue 9, item 6: what a handler reading json.Number sees is what is
// hashed).
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.50,"x"],"a":{"\u00e9":null}}`, `"\ud83d\ude00"`, `1e21`, `[[[]]]`, `-0.0`, `{"a":1,"a":2}`,
		`{"id":1234567890123456789}`, `[0.1,1.0e-7,9007199254740993,1234567890123456800,0.10000000000000001]`,
		`{"b":{"d":[{"z":1,"y":2}],"c":"\u0000"},"a":[{"\ud83d\ude00":1,"\ufb33":2}]}`} {
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
		a, errA := decodeNumbers(in)
		b, errB := decodeNumbers(out)
		if errA == nil && (errB != nil || !sameJSON(a, b)) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

func decodeNumbers(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// sameJSON compares decoded JSON values, numbers by their exact decimal
// value (json.Number text read by big.Rat).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		// Huge exponents would make big.Rat compute huge powers (a number
		// Canonicalize accepts with one is zero, save pathological
		// spellings): compare those as doubles.
		if i := strings.IndexAny(string(a), "eE"); i >= 0 {
			if exp, err := strconv.Atoi(string(a[i+1:])); err != nil || exp < -1000 || exp > 1000 {
				x, _ := strconv.ParseFloat(string(a), 64)
				y, _ := strconv.ParseFloat(string(b), 64)
				return x == y
			}
		}
		var x, y big.Rat
		_, okA := x.SetString(string(a))
		_, okB := y.SetString(string(b))
		return okA && okB && x.Cmp(&y) == 0
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
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
