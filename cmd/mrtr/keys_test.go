package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/reqstate"
)

func runApp(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = a.run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestKeygenAndRotationCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	if code, _, errOut := runApp(t, "keygen", "--id", "old", "--out", path); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	if code, _, _ := runApp(t, "keygen", "--id", "old", "--out", path); code != 1 {
		t.Fatal("keygen overwrote an existing file")
	}
	steps := []struct {
		args []string
		ids  string
	}{
		{[]string{"keys", "add", path, "--id", "new"}, "old new"},
		{[]string{"keys", "promote", path, "new"}, "new old"},
		{[]string{"keys", "remove", path, "old"}, "new"},
		{[]string{"keys", "rotate", path, "--id", "newer"}, "newer new"},
	}
	for _, s := range steps {
		if code, _, errOut := runApp(t, s.args...); code != 0 {
			t.Fatalf("%v: %d %s", s.args, code, errOut)
		}
		ring, err := reqstate.LoadKeyRing(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ring.IDs(), " "); got != s.ids {
			t.Fatalf("%v: ids %q, want %q", s.args, got, s.ids)
		}
	}
	code, out, _ := runApp(t, "keys", "check", path)
	if code != 0 || out != "newer\tprimary: seals and opens\nnew\topens\n" {
		t.Fatalf("check: %d %q", code, out)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(out, string(data[30:50])) {
		t.Fatal("check printed key material")
	}
	for _, bad := range [][]string{
		{"keys", "remove", path, "missing"},
		{"keys", "add", path, "--id", "bad id"},
		{"keys", "add", path, "--id", "new"},
	} {
		if code, _, _ := runApp(t, bad...); code != 1 {
			t.Fatalf("%v succeeded", bad)
		}
	}
	runApp(t, "keys", "remove", path, "new")
	if code, _, errOut := runApp(t, "keys", "remove", path, "newer"); code != 1 || !strings.Contains(errOut, "only key") {
		t.Fatalf("removing the last key: %d %s", code, errOut)
	}
	os.WriteFile(path, []byte(`{"keys":[{"id":"a","secret":"AAAA"}]}`), 0o600)
	if code, _, errOut := runApp(t, "keys", "check", path); code != 1 || !strings.Contains(errOut, `entry 0 (id "a")`) {
		t.Fatalf("bad file: %d %s", code, errOut)
	}
	if code, _, _ := runApp(t, "keys", "frobnicate", path); code != 2 {
		t.Fatal("unknown subcommand accepted")
	}
	if code, _, _ := runApp(t, "nope"); code != 2 {
		t.Fatal("unknown command accepted")
	}
}

func TestKeygenStdout(t *testing.T) {
	code, out, _ := runApp(t, "keygen")
	if code != 0 {
		t.Fatal(code)
	}
	if _, err := reqstate.ParseKeyRing([]byte(out)); err != nil {
		t.Fatalf("keygen output does not parse: %v", err)
	}
}

// TestGeneratedIDsUnique pins issue 12's keygen finding: `mrtr keygen
// --out FILE` then `mrtr keys add FILE` within the same second failed with
// "id repeats", because both ids were the current second.
func TestGeneratedIDsUnique(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
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

// TestKeyFileWriterRoundTrips: the key file writer exports the secrets
// explicitly (MarshalSecretJSON) now that a ring's MarshalJSON redacts
// them (issue 9, item 8).
func TestKeyFileWriterRoundTrips(t *testing.T) {
	a, _ := reqstate.GenerateKey("a", nil)
	b, _ := reqstate.GenerateKey("b", nil)
	ring, err := reqstate.NewKeyRing(a, b)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := writeKeyRing(path, ring); err != nil {
		t.Fatal(err)
	}
	back, err := reqstate.LoadKeyRing(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Keys(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatal("keys changed through the key file")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
}
