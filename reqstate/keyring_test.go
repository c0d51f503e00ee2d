package reqstate

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyRingJSONRoundTrip(t *testing.T) {
	r := testRing(t, testKey(t, "2026-11", 1), testKey(t, "2026_10", 2))
	data, err := r.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyRing(data)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Keys()) != fmt.Sprint(r.Keys()) || back.Keys()[1].Secret != r.Keys()[1].Secret {
		t.Fatal("keys changed in a JSON round trip")
	}
	if back.Primary() != "2026-11" || strings.Join(back.IDs(), ",") != "2026-11,2026_10" {
		t.Fatalf("order changed: %v", back.IDs())
	}
}

func TestParseKeyRingErrors(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 31))
	zero := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct{ name, in, want string }{
		{"empty input", ``, "empty input"},
		{"not json", `keys`, "malformed JSON"},
		{"no keys", `{"keys":[]}`, "no keys"},
		{"missing keys", `{}`, "no keys"},
		{"unknown field", `{"keys":[],"extra":1}`, `unknown field "extra"`},
		{"unknown entry field", `{"keys":[{"id":"a","secret":"` + secret + `","alg":"x"}]}`, `unknown field "alg"`},
		{"trailing", `{"keys":[{"id":"a","secret":"` + secret + `"}]} {}`, "trailing data"},
		{"short secret", `{"keys":[{"id":"a","secret":"` + secret + `"},{"id":"b","secret":"` + short + `"}]}`, `entry 1 (id "b"): secret is 31 bytes, want 32`},
		{"long secret", `{"keys":[{"id":"a","secret":"` + secret + secret + `"}]}`, `entry 0 (id "a"): secret is far longer`},
		{"url alphabet", `{"keys":[{"id":"a","secret":"` + strings.ReplaceAll(secret, "B", "-") + `"}]}`, "not standard base64"},
		{"unpadded", `{"keys":[{"id":"a","secret":"` + strings.TrimRight(secret, "=") + `"}]}`, "not standard base64"},
		{"zero secret", `{"keys":[{"id":"a","secret":"` + zero + `"}]}`, "all zero"},
		{"duplicate id", `{"keys":[{"id":"a","secret":"` + secret + `"},{"id":"a","secret":"` + secret + `"}]}`, `entry 1: id "a" repeats entry 0`},
		{"empty id", `{"keys":[{"id":"","secret":"` + secret + `"}]}`, "entry 0: key id is empty"},
		{"bad id char", `{"keys":[{"id":"a.b","secret":"` + secret + `"}]}`, "entry 0: key id has a character outside"},
		{"long id", `{"keys":[{"id":"` + strings.Repeat("a", 33) + `","secret":"` + secret + `"}]}`, "33 characters"},
		{"wrong type", `{"keys":[{"id":5,"secret":"` + secret + `"}]}`, `must be a string, not a number`},
	} {
		_, err := ParseKeyRing([]byte(tc.in))
		if !errors.Is(err, ErrKeyRing) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
			continue
		}
		for _, s := range []string{secret, short, zero, "BwcHBwcH"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error contains key material: %v", tc.name, err)
			}
		}
	}
}

func TestLoadKeyRing(t *testing.T) {
	dir := t.TempDir()
	r := testRing(t, testKey(t, "k1", 1))
	data, _ := r.MarshalSecretJSON()
	path := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKeyRing(path)
	if err != nil || got.Primary() != "k1" {
		t.Fatalf("LoadKeyRing: %v, %v", got, err)
	}
	if _, err := LoadKeyRing(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	os.WriteFile(path, []byte(`{"keys":[]}`), 0o600)
	if _, err := LoadKeyRing(path); !errors.Is(err, ErrKeyRing) || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad file: %v", err)
	}
}

// TestSecretsNeverFormatted pins issue 9, item 8: no formatter shows a
// key's secret. Before, json.Marshal (and so slog's JSON handler) wrote a
// ring's secrets, and %d or %x of a Key printed its bytes.
func TestSecretsNeverFormatted(t *testing.T) {
	k1 := testKey(t, "k1", 0xA0) // secret bytes A0 A1 ...: distinctive in every encoding
	k2 := testKey(t, "k2", 0x30) // '0' '1' ...: printable ASCII
	ring := testRing(t, k1, k2)
	type holder struct {
		Key   Key
		Ring  *KeyRing
		Value KeyRing
		Keys  []Key
		Map   map[string]Key
		Any   any
	}
	h := holder{Key: k1, Ring: ring, Value: *ring, Keys: ring.Keys(), Map: map[string]Key{"k": k2}, Any: k2}
	type embedding struct {
		Key
		N int
	}
	e := embedding{k1, 7}
	values := []any{k1, &k1, ring, *ring, h, &h, e, ring.Keys(), []*KeyRing{ring}}

	var outs []string
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %[1]v", "%10.3v"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
		outs = append(outs, fmt.Sprint(v), fmt.Sprintln(v))
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outs = append(outs, string(data))
		if tm, ok := v.(encoding.TextMarshaler); ok {
			text, _ := tm.MarshalText()
			outs = append(outs, string(text))
		}
		if err := gob.NewEncoder(io.Discard).Encode(v); err == nil {
			t.Errorf("gob encoded a %T", v)
		}
	}
	var logs bytes.Buffer
	for _, hnd := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		l := slog.New(hnd)
		l.Info("keys", "key", k1, "keyptr", &k1, "ring", ring, "ringvalue", *ring, "holder", h, "embedding", e, "keys", ring.Keys())
		l.Info("group", slog.Group("g", "key", k2, "ring", ring))
	}
	outs = append(outs, logs.String())

	all := strings.Join(outs, "\n")
	for _, k := range []Key{k1, k2} {
		s := k.Secret[:]
		for _, form := range []string{
			base64.StdEncoding.EncodeToString(s), base64.RawStdEncoding.EncodeToString(s),
			base64.URLEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s),
			hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s)), string(s),
			strings.Trim(fmt.Sprint(s), "[]"), // decimal bytes, as %v of an array
		} {
			for _, part := range []string{form, form[:8], form[len(form)-8:]} {
				if strings.Contains(all, part) {
					t.Fatalf("secret of %s leaks as %q in:\n%s", k.ID, part, all)
				}
			}
		}
	}
	// Each still names its key: redacted, not blank.
	for _, want := range []string{`{"id":"k1"}`, `{"keys":[{"id":"k1"},{"id":"k2"}]}`, `"ring":{"primary":"k1","ids":["k1","k2"]}`,
		"ring.primary=k1", `key.id=k1`, "reqstate.KeyRing[k1 k2]", `reqstate.Key{ID: "k1", Secret: <redacted>}`} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %s:\n%s", want, all)
		}
	}
	// A redacted ring is no key file.
	data, _ := json.Marshal(ring)
	if _, err := ParseKeyRing(data); !errors.Is(err, ErrKeyRing) || !strings.Contains(err.Error(), "MarshalSecretJSON") {
		t.Fatalf("ParseKeyRing of a redacted ring: %v", err)
	}
	// The explicit export round-trips.
	data, err := ring.MarshalSecretJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyRing(data)
	if err != nil || back.Keys()[0].Secret != k1.Secret || back.Keys()[1].Secret != k2.Secret {
		t.Fatalf("MarshalSecretJSON round trip: %v", err)
	}
}

func TestGenerateAndRotate(t *testing.T) {
	r, err := GenerateKeyRing("first", nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := GenerateKey("second", nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.Secret == r.Keys()[0].Secret {
		t.Fatal("two generated keys are equal")
	}
	r2, err := r.WithPrimary(k)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r2.IDs(), ",") != "second,first" || r.Len() != 1 {
		t.Fatalf("rotation: %v (original %v)", r2.IDs(), r.IDs())
	}
	if _, err := r2.WithPrimary(k); !errors.Is(err, ErrKeyRing) {
		t.Fatalf("adding a duplicate id: %v", err)
	}
	if _, err := GenerateKey("bad id", nil); !errors.Is(err, ErrKeyRing) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := GenerateKey("k", bytes.NewReader(nil)); err == nil {
		t.Fatal("GenerateKey with an empty randomness source succeeded")
	}
}
