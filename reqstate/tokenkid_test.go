package reqstate

import (
	"strings"
	"testing"
	"time"
)

func TestTokenKeyID(t *testing.T) {
	ring, err := GenerateKeyRing("k-2026_11", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(ring, nil).Seal(Binding{Method: "tools/call"}, &State{Round: 1, IssuedAt: time.Unix(1e9, 0), ExpiresAt: time.Unix(1e9+60, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := TokenKeyID(tok); got != "k-2026_11" {
		t.Fatalf("TokenKeyID of a sealed token: %q", got)
	}
	for _, bad := range []string{"", "v1.", "v1..x", "v2.k.x", "v1.k", "v1.a b.x", "v1." + string(make([]byte, MaxKeyIDLen+1)) + ".x", "v1.k\x00.x"} {
		if got := TokenKeyID(bad); got != "" {
			t.Errorf("TokenKeyID(%q) = %q", bad, got)
		}
	}
	if got := TokenKeyID("v1.k.whatever"); got != "k" {
		t.Errorf("TokenKeyID: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { TokenKeyID(tok) }); n != 0 {
		t.Fatalf("TokenKeyID allocates %v times", n)
	}
}

// FuzzTokenKeyID: TokenKeyID never panics, and returns either "" or a
// valid key id that the token's clear-text prefix names.
func FuzzTokenKeyID(f *testing.F) {
	for _, s := range []string{"v1.k1.AAAA", "v1..x", "v1.k", "", "v2.k.x", "v1.a/b.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		kid := TokenKeyID(tok)
		if kid == "" {
			return
		}
		if checkKeyID(kid) != nil || !strings.HasPrefix(tok, "v1."+kid+".") {
			t.Fatalf("TokenKeyID(%q) = %q", tok, kid)
		}
	})
}
