package proxy

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

var updateVectors = flag.Bool("update", false, "rewrite testdata/taskid_vectors.json")

// vectorKey is the fixed key of the known-answer vectors: bytes 1..32.
func vectorKey(id string) reqstate.Key {
	k := reqstate.Key{ID: id}
	for i := range k.Secret {
		k.Secret[i] = byte(i + 1)
	}
	return k
}

func testSealer(t testing.TB, keys ...reqstate.Key) *taskSealer {
	t.Helper()
	if len(keys) == 0 {
		keys = []reqstate.Key{vectorKey("k1")}
	}
	ring, err := reqstate.NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return &taskSealer{ring: func() *reqstate.KeyRing { return ring }, now: time.Now, server: "mrtr", upstream: "http://upstream.test/mcp"}
}

var (
	alice = reqstate.Principal{Issuer: "https://issuer.test", Subject: "alice"}
	bob   = reqstate.Principal{Issuer: "https://issuer.test", Subject: "bob"}
)

// TestTaskIDDeterministic: one (caller, upstream id) gives one string,
// every time; any other caller, server or upstream gives another, which
// opens only under its own binding.
func TestTaskIDDeterministic(t *testing.T) {
	s := testSealer(t)
	a1, err := s.seal(alice, "task-1")
	if err != nil {
		t.Fatal(err)
	}
	if a2, _ := s.seal(alice, "task-1"); a2 != a1 {
		t.Fatalf("two seals of one task for one caller differ: %q, %q", a1, a2)
	}
	if id, err := s.open(alice, a1); err != nil || id != "task-1" {
		t.Fatalf("open: %q, %v", id, err)
	}
	others := map[string]struct {
		who reqstate.Principal
		s   *taskSealer
	}{
		"another subject":              {bob, s},
		"anonymous":                    {reqstate.Principal{}, s},
		"issuer and subject shifted":   {reqstate.Principal{Issuer: "https://issuer.testa", Subject: "lice"}, s},
		"an empty-issuer principal":    {reqstate.Principal{Subject: "alice"}, s},
		"another server":               {alice, &taskSealer{ring: s.ring, now: s.now, server: "other", upstream: s.upstream}},
		"another upstream":             {alice, &taskSealer{ring: s.ring, now: s.now, server: s.server, upstream: "http://upstream.test/other"}},
		"the server and upstream swap": {alice, &taskSealer{ring: s.ring, now: s.now, server: s.upstream, upstream: s.server}},
	}
	for name, o := range others {
		b, err := o.s.seal(o.who, "task-1")
		if err != nil {
			t.Fatal(err)
		}
		if b == a1 {
			t.Errorf("%s: the same id as alice's", name)
		}
		if _, err := o.s.open(o.who, a1); !errors.Is(err, errTaskID) {
			t.Errorf("%s opens alice's id: %v", name, err)
		}
		if _, err := s.open(alice, b); !errors.Is(err, errTaskID) {
			t.Errorf("alice opens the id of %s: %v", name, err)
		}
	}
}

// TestTaskIDTampered: changing any character of an id, cutting it or
// adding to it leaves nothing that opens.
func TestTaskIDTampered(t *testing.T) {
	s := testSealer(t)
	id, _ := s.seal(alice, "task-1")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="
	for i := range len(id) {
		for _, c := range []byte(alphabet) {
			if c == id[i] {
				continue
			}
			b := []byte(id)
			b[i] = c
			if _, err := s.open(alice, string(b)); err == nil {
				t.Fatalf("%q (character %d changed) opens", b, i)
			}
		}
		if _, err := s.open(alice, id[:i]); err == nil {
			t.Fatalf("%q (cut to %d) opens", id[:i], i)
		}
	}
	for _, extra := range []string{"A", "AA", "AAA", "AAAA", "\n", "="} {
		if _, err := s.open(alice, id+extra); err == nil {
			t.Fatalf("%q opens", id+extra)
		}
	}
}

// TestTaskIDLimits: an upstream id of MaxUpstreamTaskID bytes seals, under
// the longest key id, to exactly MaxTaskIDLen characters, and opens; a
// longer one is refused; an id beyond MaxTaskIDLen is refused before the
// ring is even read.
func TestTaskIDLimits(t *testing.T) {
	long := strings.Repeat("k", reqstate.MaxKeyIDLen)
	s := testSealer(t, vectorKey(long))
	up := strings.Repeat("x", MaxUpstreamTaskID)
	id, err := s.seal(alice, up)
	if err != nil || len(id) != MaxTaskIDLen {
		t.Fatalf("seal of %d bytes: %d characters (%v), want %d", len(up), len(id), err, MaxTaskIDLen)
	}
	if got, err := s.open(alice, id); err != nil || got != up {
		t.Fatalf("open of the longest id: %v", err)
	}
	if _, err := s.seal(alice, up+"x"); !errors.Is(err, errTaskID) {
		t.Fatalf("seal of %d bytes: %v, want errTaskID", len(up)+1, err)
	}
	if _, err := s.seal(alice, ""); !errors.Is(err, errTaskID) {
		t.Fatalf("seal of an empty id: %v, want errTaskID", err)
	}
	reads := 0
	counting := &taskSealer{ring: func() *reqstate.KeyRing { reads++; return s.ring() }, now: time.Now, server: s.server, upstream: s.upstream}
	for _, tid := range []string{id + "A", "t1.k1." + strings.Repeat("A", MaxTaskIDLen), strings.Repeat("A", 1<<20)} {
		if _, err := counting.open(alice, tid); !errors.Is(err, errTaskID) {
			t.Fatalf("an id of %d characters: %v", len(tid), err)
		}
	}
	if reads != 0 {
		t.Fatalf("over-long ids read the ring %d times, want none: refused before any decoding", reads)
	}
}

// TestTaskIDNoRing: without a ring every seal and open fails, closed.
func TestTaskIDNoRing(t *testing.T) {
	s := &taskSealer{now: time.Now}
	if _, err := s.seal(alice, "task-1"); !errors.Is(err, errNoTaskKeys) {
		t.Fatalf("seal: %v", err)
	}
	if _, err := s.open(alice, "t1.k1.AAAA"); err == nil {
		t.Fatal("open without a ring succeeded")
	}
}

// TestTaskIDSubkeys: the ring secret itself does not open a task id's
// body (its AES key is an HKDF subkey), and a requestState token sealed
// with the same ring is no task id.
func TestTaskIDSubkeys(t *testing.T) {
	k := vectorKey("k1")
	s := testSealer(t, k)
	id, _ := s.seal(alice, "task-1")
	raw, err := base64.RawURLEncoding.DecodeString(id[len("t1.k1."):])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(k.Secret[:])
	gcm, _ := cipher.NewGCM(block)
	ad := s.appendAD(nil, "k1", alice)
	if _, err := gcm.Open(nil, raw[:sivSize], raw[sivSize:], ad); err == nil {
		t.Fatal("the ring secret opens a task id: its key is not a subkey")
	}
	ring, _ := reqstate.NewKeyRing(k)
	tok, err := reqstate.New(ring, nil).Seal(reqstate.Binding{Method: "tools/call", Target: "t", ServerID: "mrtr"}, &reqstate.State{Round: 1, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.open(alice, tok); err == nil {
		t.Fatal("a requestState token opens as a task id")
	}
	if _, err := s.open(alice, "t1."+tok[len("v1."):]); err == nil {
		t.Fatal("a requestState token's body opens as a task id")
	}
}

// TestTaskIDRotation: an id opens under any key of the ring that sealed
// it, its window closed or not; new ids are sealed by the key that seals
// now; an id whose key left the ring opens no more.
func TestTaskIDRotation(t *testing.T) {
	k1, k2 := vectorKey("k1"), vectorKey("k2")
	k2.Secret[0] ^= 0xff
	old := testSealer(t, k1)
	id, _ := old.seal(alice, "task-1")
	retired := k1
	retired.NotAfter = time.Unix(1, 0)
	rotated := testSealer(t, k2, retired)
	if got, err := rotated.open(alice, id); err != nil || got != "task-1" {
		t.Fatalf("after rotation: %q, %v", got, err)
	}
	if nid, _ := rotated.seal(alice, "task-2"); !strings.HasPrefix(nid, "t1.k2.") {
		t.Fatalf("a new id after rotation: %q, want one sealed with k2", nid)
	}
	if _, err := testSealer(t, k2).open(alice, id); !errors.Is(err, errTaskID) {
		t.Fatalf("after k1 left the ring: %v", err)
	}
}

// taskIDVector is one frozen known answer.
type taskIDVector struct {
	KeyID    string `json:"key_id"`
	Server   string `json:"server"`
	Upstream string `json:"upstream"`
	Issuer   string `json:"issuer"`
	Subject  string `json:"subject"`
	TaskID   string `json:"upstream_task_id"`
	Sealed   string `json:"sealed"`
}

// TestTaskIDVectors: the format is frozen. A change to the construction
// or the binding's encoding fails here and must bump the "t1." prefix
// (run with -update only for a new version).
func TestTaskIDVectors(t *testing.T) {
	path := filepath.Join("testdata", "taskid_vectors.json")
	cases := []taskIDVector{
		{KeyID: "k1", Server: "mrtr", Upstream: "http://127.0.0.1:3000/mcp", Issuer: "https://issuer.test", Subject: "alice", TaskID: "rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB"},
		{KeyID: "k1", Server: "mrtr", Upstream: "http://127.0.0.1:3000/mcp", TaskID: "rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB"},
		{KeyID: "2026-11", Server: "cluster-a", Upstream: "https://tools.example/mcp", Subject: "svc", TaskID: "786512e2-9e0d-44bd-8f29-789f320fe840"},
		{KeyID: "k1", Server: "mrtr", Upstream: "http://127.0.0.1:3000/mcp", Issuer: "https://issuer.test", Subject: "alice", TaskID: "é \" \\ \u2028"},
	}
	for i := range cases {
		c := &cases[i]
		s := testSealer(t, vectorKey(c.KeyID))
		s.server, s.upstream = c.Server, c.Upstream
		got, err := s.seal(reqstate.Principal{Issuer: c.Issuer, Subject: c.Subject}, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		c.Sealed = got
	}
	got, _ := json.MarshalIndent(cases, "", "  ")
	got = append(got, '\n')
	if *updateVectors {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the task ids sealed now differ from %s (%v): the format changed; give it a new version prefix. Now:\n%s", path, err, got)
	}
	for i, c := range cases {
		s := testSealer(t, vectorKey(c.KeyID))
		s.server, s.upstream = c.Server, c.Upstream
		if id, err := s.open(reqstate.Principal{Issuer: c.Issuer, Subject: c.Subject}, c.Sealed); err != nil || id != c.TaskID {
			t.Errorf("vector %d does not open: %q, %v", i, id, err)
		}
	}
}

// FuzzTaskIDOpen: the opener never panics, refuses anything longer than
// MaxTaskIDLen, and is non-malleable: whatever opens is byte for byte the
// id this caller's seal of the same upstream id gives.
func FuzzTaskIDOpen(f *testing.F) {
	s := testSealer(f)
	for _, up := range []string{"task-1", "rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB", strings.Repeat("x", MaxUpstreamTaskID)} {
		id, _ := s.seal(alice, up)
		f.Add(id)
		f.Add(id[:len(id)-1])
		f.Add(id + "A")
		f.Add(strings.Replace(id, "t1.k1.", "t1.k2.", 1))
	}
	f.Add("")
	f.Add("t1.")
	f.Add("t1.k1.")
	f.Add("v1.k1.AAAA")
	f.Fuzz(func(t *testing.T, tid string) {
		up, err := s.open(alice, tid)
		if err != nil {
			if !errors.Is(err, errTaskID) {
				t.Fatalf("open: %v, want errTaskID", err)
			}
			return
		}
		if len(tid) > MaxTaskIDLen {
			t.Fatalf("an id of %d characters opened", len(tid))
		}
		again, err := s.seal(alice, up)
		if err != nil || again != tid {
			t.Fatalf("%q opened to %q, which seals to %q (%v): malleable", tid, up, again, err)
		}
		if _, err := s.open(bob, tid); err == nil {
			t.Fatalf("%q opens for another caller too", tid)
		}
	})
}

// BenchmarkTaskID measures sealing an upstream task id (once per
// CreateTaskResult) and opening the caller's (once per tasks/* request).
func BenchmarkTaskID(b *testing.B) {
	s := testSealer(b)
	id, _ := s.seal(alice, "rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB")
	b.Run("seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = s.seal(alice, "rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB")
		}
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.open(alice, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
