package reqstate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyRingJSONRoundTrip(t *testing.T) {
	r := testRing(t, testKey(t, "2026-11", 1), testKey(t, "2026_10", 2))
	data, err := r.MarshalJSON()
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
		{"wrong type", `{"keys":[{"id":5,"secret":"` + secret + `"}]}`, `must be string`},
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
	data, _ := r.MarshalJSON()
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

func TestKeyNeverPrintsSecret(t *testing.T) {
	k := testKey(t, "k1", 0x41) // secret bytes 'A', 'B', ...
	ring := testRing(t, k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), fmt.Sprint(ring), fmt.Sprintf("%+v", ring)} {
		if strings.Contains(s, "ABCD") || strings.Contains(s, base64.StdEncoding.EncodeToString(k.Secret[:])[:8]) {
			t.Fatalf("formatting leaks the secret: %s", s)
		}
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
