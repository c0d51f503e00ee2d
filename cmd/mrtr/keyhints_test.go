package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestKeyFileHints pins issue 21 item 10: errors about key files say
// what to do, in the file's terms, never a Go type name.
func TestKeyFileHints(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "keys.json")
	for _, args := range [][]string{{"serve", "--keys", missing}, {"keys", "check", missing}, {"keys", "status", missing}} {
		code, _, errOut := runApp(t, args...)
		if code != 1 || !strings.Contains(errOut, "no such file") || !strings.Contains(errOut, "create one with: mrtr keygen --out "+missing) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}

	array := filepath.Join(dir, "array.json")
	os.WriteFile(array, []byte(`[{"id":"k","secret":"AAAA"}]`), 0o600)
	code, _, errOut := runApp(t, "keys", "check", array)
	if code != 1 || !strings.Contains(errOut, `a key ring is a JSON object {"keys": [...]}, not an array`) || strings.Contains(errOut, "reqstate.") {
		t.Errorf("array key file: exit %d, stderr %q", code, errOut)
	}
	if _, err := reqstate.ParseKeyRing([]byte(`{"keys":[{"id":5}]}`)); err == nil || !strings.Contains(err.Error(), `field "keys.id" must be a string, not a number`) {
		t.Errorf("id a number: %v", err)
	}

	// keygen --out on an existing file names the ways on.
	path := filepath.Join(dir, "ring.json")
	if code, _, errOut := runApp(t, "keygen", "--id", "k1", "--out", path); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	code, _, errOut = runApp(t, "keygen", "--id", "k2", "--out", path)
	if code != 1 || !strings.Contains(errOut, "mrtr keys rotate "+path) || !strings.Contains(errOut, "--force") {
		t.Errorf("keygen over a file: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runApp(t, "keygen", "--id", "k2", "--out", path, "--force"); code != 0 {
		t.Fatalf("keygen --force: %s", errOut)
	}
	if ring, err := reqstate.LoadKeyRing(path); err != nil || ring.Primary() != "k2" {
		t.Fatalf("after --force: %v %v", ring, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("--force left mode %v", st.Mode().Perm())
	}
}

// TestKeyFileReadableWarns pins issue 21 item 10: a key file its group
// or others may read is used, with a warning naming the fix.
func TestKeyFileReadableWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	if code, _, errOut := runApp(t, "keygen", "--id", "k1", "--out", path); code != 0 {
		t.Fatal(errOut)
	}
	_, _, errOut := runApp(t, "keys", "check", path)
	if strings.Contains(errOut, "warning") {
		t.Fatalf("mode 0600 warned: %s", errOut)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "key file " + path + " is accessible by its group or others (mode 0644)"
	for _, args := range [][]string{{"keys", "check", path}, {"keys", "status", path}} {
		code, _, errOut := runApp(t, args...)
		if code != 0 || !strings.Contains(errOut, "warning: "+want) || !strings.Contains(errOut, "chmod 600 "+path) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	_, logs := startServe(t, "--keys", path)
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Errorf("serve with a 0644 key file: no warning: %s", logs)
	}
}

// TestKeysRemoveAfterPromoteWarns pins issue 21 item 10: removing the
// previous primary right after a promote warns that its recent tokens
// stop opening; removing it once the TTL has passed does not.
func TestKeysRemoveAfterPromoteWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	for _, args := range [][]string{{"keygen", "--id", "old", "--out", path}, {"keys", "add", path, "--id", "new"}, {"keys", "promote", path, "new"}} {
		if code, _, errOut := runApp(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	code, _, errOut := runApp(t, "keys", "remove", path, "old")
	if code != 0 || !strings.Contains(errOut, `"old" is the key that sealed before "new": tokens it sealed in the last 5m0s (--ttl) stop opening now`) {
		t.Errorf("remove right after promote: exit %d, stderr %q", code, errOut)
	}
	// Once the file is older than --ttl: no warning.
	for _, args := range [][]string{{"keys", "add", path, "--id", "old2"}, {"keys", "promote", path, "old2"}} {
		if code, _, errOut := runApp(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old := st.ModTime().Add(-10 * time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runApp(t, "keys", "remove", path, "new"); code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("remove after the TTL: exit %d, stderr %q", code, errOut)
	}
}
