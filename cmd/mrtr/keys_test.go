package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/reqstate"
)

// runApp runs mrtr args in-process, with no environment, through main's
// dispatcher.
func runApp(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testcmd.Run(t, run, nil, args...)
}

// runAppGetenv is runApp with the environment getenv.
func runAppGetenv(t *testing.T, getenv func(string) string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testcmd.Run(t, run, getenv, args...)
}

// TestRunAppDeadline: the tests' in-process runs cannot hang the package.
// `mrtr serve` never ends on its own, so testcmd.RunFor must give up on it at
// its bound, report it, and stop it by cancelling its context.
func TestRunAppDeadline(t *testing.T) {
	_, _, stderr, ended, stopped := testcmd.RunFor(50*time.Millisecond, run, func(string) string { return "" }, "serve", "--addr", "127.0.0.1:0")
	if ended || !stopped {
		t.Fatalf("serve, which cannot end by itself: ended %v, stopped at the deadline %v: %s", ended, stopped, stderr)
	}
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

// TestKeysStatus pins `mrtr keys status`: each key's role, window and age
// at a given instant, with the warnings (old primary, its successor,
// retired keys), and the failure when no key can seal.
func TestKeysStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	key := func(id string, fill byte, nb, na string) reqstate.Key {
		k := reqstate.Key{ID: id}
		for i := range k.Secret {
			k.Secret[i] = fill + byte(i)
		}
		if nb != "" {
			k.NotBefore, _ = time.Parse(time.RFC3339, nb)
		}
		if na != "" {
			k.NotAfter, _ = time.Parse(time.RFC3339, na)
		}
		return k
	}
	testcmd.WriteRing(t, path,
		key("2026-12-01-000000-aaaaaa", 1, "2026-12-01T00:00:00Z", ""),
		key("2026-08-01-120000-bbbbbb", 2, "", "2026-12-01T00:00:00Z"),
		key("legacy", 3, "", ""),
		key("2026-05", 4, "", "2026-06-01T00:00:00Z"),
	)
	code, out, errOut := runApp(t, "keys", "status", path, "--at", "2026-11-30T12:00:00Z")
	want := path + ` at 2026-11-30T12:00:00Z: the first key in file order whose window is open seals

ID                        ROLE           NOT_BEFORE            NOT_AFTER             AGE
2026-12-01-000000-aaaaaa  not-yet-valid  2026-12-01T00:00:00Z  -                     in 12h
2026-08-01-120000-bbbbbb  primary        -                     2026-12-01T00:00:00Z  121d (id)
legacy                    opening-only   -                     -                     ?
2026-05                   retired        -                     2026-06-01T00:00:00Z  213d (id)

warning: primary 2026-08-01-120000-bbbbbb is 121d old, more than --max-age 90d: rotate it (mrtr keys add ` + path + `, then, once every node has it, mrtr keys promote ` + path + ` ID)
note: at 2026-12-01T00:00:00Z 2026-12-01-000000-aaaaaa takes over from 2026-08-01-120000-bbbbbb
note: 2026-05 opens nothing since 2026-06-01T00:05:05Z: remove it (mrtr keys remove ` + path + ` 2026-05)
`
	if code != 0 || out != want {
		t.Fatalf("exit %d, stderr %q, output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	// After the switch the new key is primary and young; --max-age and
	// --ttl move the judgements.
	code, out, _ = runApp(t, "keys", "status", path, "--at", "2026-12-01T00:00:00Z", "--max-age", "200d", "--ttl", "1h")
	for _, line := range []string{
		"2026-12-01-000000-aaaaaa  primary       2026-12-01T00:00:00Z  -                     0s\n",
		"2026-08-01-120000-bbbbbb  opening-only  -                     2026-12-01T00:00:00Z  121d (id)\n",
		"note: 2026-05 opens nothing since 2026-06-01T01:00:05Z",
	} {
		if code != 0 || !strings.Contains(out, line) {
			t.Fatalf("exit %d; output lacks %q:\n%s", code, line, out)
		}
	}
	if strings.Contains(out, "warning:") {
		t.Fatalf("warning for a young primary:\n%s", out)
	}
	// The old key retires once its not_after plus TTL and leeway passed.
	_, out, _ = runApp(t, "keys", "status", path, "--at", "2026-12-01T00:05:05Z")
	if !strings.Contains(out, "2026-08-01-120000-bbbbbb  retired") {
		t.Fatalf("not retired after not_after + ttl + leeway:\n%s", out)
	}
	// A primary that stops sealing with nobody after it.
	testcmd.WriteRing(t, path, key("solo", 5, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"))
	code, out, _ = runApp(t, "keys", "status", path, "--at", "2026-11-30T12:00:00Z")
	if code != 0 || !strings.Contains(out, "warning: primary solo stops sealing at 2026-12-01T00:00:00Z and no other key's window is open then") ||
		!strings.Contains(out, "solo  primary  2026-11-01T00:00:00Z  2026-12-01T00:00:00Z  29d\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// No key can seal: an error, exit 1.
	code, _, errOut = runApp(t, "keys", "status", path, "--at", "2026-12-01T00:00:00Z")
	if code != 1 || !strings.Contains(errOut, "no key can seal now at 2026-12-01T00:00:00Z") {
		t.Fatalf("no sealer: exit %d %q", code, errOut)
	}
	for _, bad := range [][]string{{"--max-age", "soon"}, {"--at", "tomorrow"}, {"--max-age", "-3d"}} {
		if code, _, _ := runApp(t, append([]string{"keys", "status", path}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d", bad, code)
		}
	}
	// No secret in any output.
	data, _ := os.ReadFile(path)
	if strings.Contains(out+errOut, string(data[40:60])) {
		t.Fatal("status printed key material")
	}
}
