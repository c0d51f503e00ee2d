package reqstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
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
// hashed). HashArguments accepts what Canonicalize does save objects with
// member names equal under strings.EqualFold (issue 18, item 3), and then
// hashes the canonical form.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.50,"x"],"a":{"\u00e9":null}}`, `"\ud83d\ude00"`, `1e21`, `[[[]]]`, `-0.0`, `{"a":1,"a":2}`,
		`{"id":1234567890123456789}`, `[0.1,1.0e-7,9007199254740993,1234567890123456800,0.10000000000000001]`,
		`{"b":{"d":[{"z":1,"y":2}],"c":"\u0000"},"a":[{"\ud83d\ude00":1,"\ufb33":2}]}`,
		`{"ID":2,"id":1}`, `[{"x":{"s":1,"\u017f":2}}]`, `{"k":1,"\u212a":2,"a":{"recordId":1,"record_id":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		h, herr := HashArguments(in)
		if err != nil {
			if !errors.Is(err, ErrJSON) {
				t.Fatalf("error %v does not wrap ErrJSON", err)
			}
			if herr == nil && len(bytes.TrimSpace(in)) > 0 {
				t.Fatalf("HashArguments accepts what Canonicalize refuses (%v)", err)
			}
			return
		}
		switch folded := foldedCollision(t, out); {
		case folded && !errors.Is(herr, ErrFoldedNames):
			t.Fatalf("names equal under case folding in %q: HashArguments gives %v", out, herr)
		case !folded && herr != nil:
			t.Fatalf("HashArguments refuses %q: %v", out, herr)
		case !folded && string(bytes.TrimSpace(in)) != "null" && h != sha256.Sum256(out):
			t.Fatalf("HashArguments(%q) is not the hash of its canonical form", in)
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

// foldedCollision reports whether the JSON text data (valid) holds an
// object with two member names equal under strings.EqualFold, comparing
// every pair of names of each object.
func foldedCollision(t *testing.T, data []byte) bool {
	type frame struct {
		object, key bool // key: an object's next string is a member name
		names       []string
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("canonical form %q does not decode: %v", data, err)
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				stack = append(stack, &frame{object: tok == '{', key: tok == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
			valueDone()
		case string:
			if top := len(stack) - 1; top >= 0 && stack[top].key {
				for _, n := range stack[top].names {
					if strings.EqualFold(n, tok) {
						return true
					}
				}
				stack[top].names = append(stack[top].names, tok)
				stack[top].key = false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
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

// FuzzParseKeyRing: the key file parser never panics; whatever it accepts
// writes back (MarshalSecretJSON) to a file that parses to the same keys,
// windows included; every refusal wraps ErrKeyRing and quotes no secret
// of the input.
func FuzzParseKeyRing(f *testing.F) {
	secret := "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
	f.Add([]byte(`{"keys":[{"id":"2026-11","secret":"` + secret + `"}]}`))
	f.Add([]byte(`{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-01T00:00:00Z","not_after":"2027-03-01T00:00:00.5+01:00"},{"id":"b","secret":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="}]}`))
	f.Add([]byte(`{"keys":[{"id":"a","secret":"` + secret + `","not_after":"` + secret + `"}]}`))
	f.Add([]byte(`{"keys":[{"id":"a","secret":"` + secret + `","not_before":"2026-12-02T00:00:00Z","not_after":"2026-12-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseKeyRing(data)
		if err != nil {
			if !errors.Is(err, ErrKeyRing) {
				t.Fatalf("error %v does not wrap ErrKeyRing", err)
			}
			var in struct {
				Keys []struct{ Secret string } `json:"keys"`
			}
			if json.Unmarshal(data, &in) == nil {
				for _, k := range in.Keys {
					if len(k.Secret) >= 12 && strings.Contains(err.Error(), k.Secret) {
						t.Fatalf("error quotes a secret: %v", err)
					}
				}
			}
			return
		}
		out, err := r.MarshalSecretJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseKeyRing(out)
		if err != nil {
			t.Fatalf("a ring we wrote does not parse: %v\n%s", err, out)
		}
		ks, bs := r.Keys(), back.Keys()
		if len(ks) != len(bs) {
			t.Fatalf("%d keys became %d", len(ks), len(bs))
		}
		for i := range ks {
			if ks[i].ID != bs[i].ID || ks[i].Secret != bs[i].Secret || !ks[i].NotBefore.Equal(bs[i].NotBefore) || !ks[i].NotAfter.Equal(bs[i].NotAfter) {
				t.Fatalf("entry %d changed in a round trip: %v / %v", i, ks[i], bs[i])
			}
		}
	})
}
