package keyfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mrtr-go/mrtr/reqstate"
)

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
	if err := Write(path, ring); err != nil {
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
