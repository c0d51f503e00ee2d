package keys

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestGeneratedIDsUnique pins issue 12's keygen finding: `mrtr keygen
// --out FILE` then `mrtr keys add FILE` within the same second failed with
// "id repeats", because both ids were the current second.
func TestGeneratedIDsUnique(t *testing.T) {
	path := filepath.Join(t.TempDir(), "json")
	if code, _, errOut := runApp(t, "keygen", "--out", path); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	for range 3 {
		if code, _, errOut := runApp(t, "keys", "add", path); code != 0 {
			t.Fatalf("keys add right after keygen: %d %s", code, errOut)
		}
	}
	if code, _, errOut := runApp(t, "keys", "rotate", path); code != 0 {
		t.Fatalf("keys rotate: %d %s", code, errOut)
	}
	ring, err := reqstate.LoadKeyRing(path)
	if err != nil || ring.Len() != 5 {
		t.Fatalf("ring after keygen, 3 adds and a rotation: %v %v", ring, err)
	}
	seen := map[string]bool{}
	for range 100 {
		id, err := defaultKeyID()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("id %s made twice", id)
		}
		seen[id] = true
		if _, err := reqstate.GenerateKey(id, nil); err != nil { // the id charset and length
			t.Fatalf("generated id %q: %v", id, err)
		}
	}
}

// keys add, rotate and keygen take a window, and every command keeps the
// windows already in the file.
func TestKeysWindowsPreserved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "json")
	if code, _, errOut := runApp(t, "keygen", "--id", "old", "--not-after", "2027-01-01T00:00:00Z", "--out", path); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	if code, _, errOut := runApp(t, "keys", "add", path, "--id", "new", "--not-before", "2026-12-31T00:00:00Z"); code != 0 {
		t.Fatalf("add: %s", errOut)
	}
	if code, _, errOut := runApp(t, "keys", "promote", path, "new"); code != 0 {
		t.Fatalf("promote: %s", errOut)
	}
	if code, _, errOut := runApp(t, "keys", "rotate", path, "--id", "newer", "--not-before", "2027-06-01T00:00:00Z", "--not-after", "2028-01-01T00:00:00Z"); code != 0 {
		t.Fatalf("rotate: %s", errOut)
	}
	// keys window sets or clears one bound and keeps the other.
	if code, _, errOut := runApp(t, "keys", "window", path, "new", "--not-after", "2027-07-01T00:00:00Z"); code != 0 {
		t.Fatalf("window: %s", errOut)
	}
	if code, _, errOut := runApp(t, "keys", "window", path, "newer", "--not-before", "none"); code != 0 {
		t.Fatalf("window none: %s", errOut)
	}
	if code, _, errOut := runApp(t, "keys", "window", path, "new"); code != 1 || !strings.Contains(errOut, "give --not-before and/or --not-after") {
		t.Fatalf("window without a bound: %d %s", code, errOut)
	}
	ring, err := reqstate.LoadKeyRing(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, k := range ring.Keys() {
		got[k.ID] = [2]string{windowText(k.NotBefore), windowText(k.NotAfter)}
	}
	want := map[string][2]string{
		"newer": {"-", "2028-01-01T00:00:00Z"},
		"new":   {"2026-12-31T00:00:00Z", "2027-07-01T00:00:00Z"},
		"old":   {"-", "2027-01-01T00:00:00Z"},
	}
	if strings.Join(ring.IDs(), " ") != "newer new old" || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ring %v windows %v", ring.IDs(), got)
	}
	for _, bad := range [][]string{
		{"keys", "add", path, "--not-before", "2027-01-01"},
		{"keys", "add", path, "--not-before", "2027-02-01T00:00:00Z", "--not-after", "2027-01-01T00:00:00Z"},
		{"keys", "window", path, "old", "--not-before", "2027-02-01T00:00:00Z"}, // after its not_after
		{"keys", "window", path, "missing", "--not-after", "none"},
	} {
		if code, _, _ := runApp(t, bad...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
}
