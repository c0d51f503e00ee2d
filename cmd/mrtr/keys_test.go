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
