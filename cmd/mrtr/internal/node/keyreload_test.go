package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestKeyReloader drives the reload path directly: an unchanged file is
// left alone, a malformed one or one that gives a known id another secret
// or whose windows are all closed is refused with a log line naming the
// file and the reason (no secret) while the ring stays, and a good one is
// installed with its primary logged.
func TestKeyReloader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := testcmd.GenKey(t, "key-a"), testcmd.GenKey(t, "key-b")
	testcmd.WriteRing(t, path, a)
	var logs bytes.Buffer
	rl := &keyReloader{path: path, log: slog.New(slog.NewTextHandler(&logs, nil)), now: time.Now}
	ring, err := rl.initial()
	if err != nil {
		t.Fatal(err)
	}
	rl.codec = reqstate.New(ring, nil)
	if rl.reload("poll") || rl.reload("SIGHUP") {
		t.Fatal("an unchanged file reloaded")
	}
	if !strings.Contains(logs.String(), "key ring unchanged") {
		t.Fatalf("SIGHUP on an unchanged file says nothing: %s", logs.String())
	}
	// Each broken file is refused; the ring stays.
	evil := testcmd.GenKey(t, "key-a") // the same id, another secret
	past := testcmd.GenKey(t, "key-c")
	past.NotAfter = time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name, content, reason string
	}{
		{"truncated", `{"keys":[{"id":"key-b","secret":"`, "malformed JSON"},
		{"empty", ``, "empty input"},
		{"short secret", `{"keys":[{"id":"key-b","secret":"c2hvcnQ="}]}`, "secret is 5 bytes"},
	} {
		logs.Reset()
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if rl.reload("poll") {
			t.Fatalf("%s: reloaded", tc.name)
		}
		if got := logs.String(); !strings.Contains(got, "reload refused") || !strings.Contains(got, path) || !strings.Contains(got, tc.reason) {
			t.Fatalf("%s: log %q lacks the file or the reason %q", tc.name, got, tc.reason)
		}
		if ids := rl.codec.KeyRing().IDs(); len(ids) != 1 || ids[0] != "key-a" {
			t.Fatalf("%s: ring now %v", tc.name, ids)
		}
		// A poll does not repeat the refusal of the same content.
		logs.Reset()
		os.Chtimes(path, time.Now(), time.Now().Add(time.Second))
		if rl.reload("poll"); logs.Len() != 0 {
			t.Fatalf("%s: refused twice: %s", tc.name, logs.String())
		}
	}
	for _, tc := range []struct {
		name   string
		keys   []reqstate.Key
		reason string
	}{
		{"new secret under a known id", []reqstate.Key{b, evil}, `key id \"key-a\" already names another secret`},
		{"no open window", []reqstate.Key{past}, "no key may seal now"},
	} {
		logs.Reset()
		testcmd.WriteRing(t, path, tc.keys...)
		if rl.reload("poll") {
			t.Fatalf("%s: reloaded", tc.name)
		}
		if got := logs.String(); !strings.Contains(got, "reload refused") || !strings.Contains(got, tc.reason) {
			t.Fatalf("%s: log %q lacks %q", tc.name, got, tc.reason)
		}
		for _, s := range testcmd.SecretForms(tc.keys...) {
			if strings.Contains(logs.String(), s) {
				t.Fatalf("%s: a secret in the log", tc.name)
			}
		}
		if ids := rl.codec.KeyRing().IDs(); len(ids) != 1 || ids[0] != "key-a" {
			t.Fatalf("%s: ring now %v", tc.name, ids)
		}
	}
	// A missing file (mid-replace) is said once and keeps the ring.
	logs.Reset()
	os.Remove(path)
	rl.reload("poll")
	rl.reload("poll")
	if n := strings.Count(logs.String(), "reload refused"); n != 1 || rl.codec.KeyRing().Primary() != "key-a" {
		t.Fatalf("missing file: %d refusals, ring %v", n, rl.codec.KeyRing().IDs())
	}
	// A good file: installed, its primary logged.
	logs.Reset()
	testcmd.WriteRing(t, path, b, a)
	if !rl.reload("poll") {
		t.Fatalf("good file not reloaded: %s", logs.String())
	}
	if got := logs.String(); !strings.Contains(got, "key ring reloaded") || !strings.Contains(got, "primary=key-b") || !strings.Contains(got, "trigger=poll") {
		t.Fatalf("reload log: %s", got)
	}
	if rl.codec.KeyRing().Primary() != "key-b" {
		t.Fatal("ring not replaced")
	}
	// Dropping the key that was sealing is allowed, with a warning.
	logs.Reset()
	testcmd.WriteRing(t, path, a)
	if !rl.reload("poll") || !strings.Contains(logs.String(), "dropped=key-b") {
		t.Fatalf("drop: %s", logs.String())
	}
}

// TestKeyReloaderRefusedNotCurrent: a refused file is never recorded as
// the current one. A fix that keeps the refused file's size and
// modification time (an editor fixing one character within the
// filesystem's time granularity, a copy that keeps times) is still picked
// up by the poll; SIGHUP on a file still refused refuses it again instead
// of calling it unchanged; and the same mistake made again after the good
// file came back is said again.
func TestKeyReloaderRefusedNotCurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := testcmd.GenKey(t, "key-a"), testcmd.GenKey(t, "key-b")
	testcmd.WriteRing(t, path, a)
	var logs bytes.Buffer
	rl := &keyReloader{path: path, log: slog.New(slog.NewTextHandler(&logs, nil)), now: time.Now}
	ring, err := rl.initial()
	if err != nil {
		t.Fatal(err)
	}
	rl.codec = reqstate.New(ring, nil)

	// good is the ring B, A; bad is the same bytes with B's secret broken.
	testcmd.WriteRing(t, path, b, a)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(good, []byte(`"secret":"`))
	if i < 0 {
		t.Fatalf("no secret in %d bytes of key file", len(good))
	}
	bad := bytes.Clone(good)
	bad[i+len(`"secret":"`)] = '!'
	stamp := time.Unix(1_700_000_000, 0)
	put := func(content []byte, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	refusals := func() int { return strings.Count(logs.String(), "reload refused") }
	ringIDs := func() string { return strings.Join(rl.codec.KeyRing().IDs(), " ") }

	put(bad, stamp)
	if rl.reload("poll") || refusals() != 1 || ringIDs() != "key-a" {
		t.Fatalf("broken file: %d refusals, ring %q: %s", refusals(), ringIDs(), logs.String())
	}
	if rl.reload("SIGHUP") || refusals() != 2 || strings.Contains(logs.String(), "key ring unchanged") {
		t.Fatalf("SIGHUP on the file still refused: %d refusals: %s", refusals(), logs.String())
	}
	if rl.reload("poll") || refusals() != 2 {
		t.Fatalf("a poll repeated the refusal: %s", logs.String())
	}
	// The fix has the refused file's size and modification time.
	put(good, stamp)
	if !rl.reload("poll") || ringIDs() != "key-b key-a" {
		t.Fatalf("the fixed file (same size and time as the refused one) not picked up: ring %q: %s", ringIDs(), logs.String())
	}

	// The same mistake, the good file back, the same mistake again: said twice.
	logs.Reset()
	put(bad, stamp.Add(1*time.Second))
	rl.reload("poll")
	put(good, stamp.Add(2*time.Second))
	if rl.reload("poll") || refusals() != 1 {
		t.Fatalf("after the good file came back: %d refusals: %s", refusals(), logs.String())
	}
	put(bad, stamp.Add(3*time.Second))
	rl.reload("poll")
	if n := refusals(); n != 2 || ringIDs() != "key-b key-a" {
		t.Fatalf("the same broken file written again: %d refusals (want 2), ring %q: %s", n, ringIDs(), logs.String())
	}
}

// Inline keys in $MRTR_KEYS cannot be reloaded, and the server says so.
func TestServeInlineKeysNotReloadable(t *testing.T) {
	ring, _ := reqstate.GenerateKeyRing("inline", nil)
	data, _ := ring.MarshalSecretJSON()
	c := &CommonConfig{KeysJSON: string(data), keysPoll: time.Hour, Ttl: time.Minute, AnonTTL: time.Minute, keySealWarn: 1}
	var logs testcmd.Buffer
	codec, eph, stop, err := c.openKeys(t.Context(), slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil || eph || codec.KeyRing().Primary() != "inline" {
		t.Fatalf("%v %v", eph, err)
	}
	stop()
	if !strings.Contains(logs.String(), "inline in $MRTR_KEYS: it cannot be reloaded") {
		t.Fatalf("log: %s", logs.String())
	}
}

// /readyz's keys check reads the ring in use, so it follows a reload, and
// is unready while no key's window is open.
func TestReadinessFollowsKeyRing(t *testing.T) {
	open := testcmd.GenKey(t, "open")
	closed := testcmd.GenKey(t, "closed")
	closed.NotAfter = time.Now().Add(-time.Minute)
	cur, _ := reqstate.NewKeyRing(open)
	tel := &Telemetry{Health: &observe.Health{}}
	tel.addReadiness(func() *reqstate.KeyRing { return cur }, nil, "", time.Second)
	check := tel.Health.Checks[0]
	if check.Name != "keys" || check.Fn(t.Context()) != nil {
		t.Fatalf("keys check on a sealing ring: %v", check.Fn(t.Context()))
	}
	cur, _ = reqstate.NewKeyRing(closed)
	if err := check.Fn(t.Context()); err == nil || !strings.Contains(err.Error(), "no key of the ring may seal now") {
		t.Fatalf("keys check with every window closed: %v", err)
	}
}
