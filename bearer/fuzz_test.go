package bearer

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

func FuzzParseJWKS(f *testing.F) {
	keys := []*testissuer.Key{testissuer.NewKey(f, "r", "RS256"), testissuer.NewKey(f, "e", "ES256"), testissuer.NewKey(f, "d", "EdDSA")}
	f.Add(testissuer.JWKS(keys...))
	f.Add(testissuer.JWKS(keys[1]))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AAAA"},{"kty":"EC","crv":"P-384","x":"","y":""}]}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseJWKS(data)
		if err != nil {
			return
		}
		for kid, k := range s.byKid {
			if k.kid != kid {
				t.Fatalf("key %q filed under %q", k.kid, kid)
			}
			ok := false
			switch pub := k.pub.(type) {
			case *rsa.PublicKey:
				ok = strings.HasPrefix(k.alg, "RS") || strings.HasPrefix(k.alg, "PS")
				ok = ok && pub.N.BitLen() >= minRSABits
			case *ecdsa.PublicKey:
				ok = k.alg == map[int]string{256: "ES256", 384: "ES384", 521: "ES512"}[pub.Curve.Params().BitSize]
			case ed25519.PublicKey:
				ok = k.alg == "EdDSA" && len(pub) == ed25519.PublicKeySize
			}
			if !ok {
				t.Fatalf("key %q: alg %s with a %T", kid, k.alg, k.pub)
			}
		}
	})
}

// FuzzVerify feeds arbitrary tokens to a verifier in each mode. Nothing may
// panic, every failure is ErrInvalidToken, and a token that verifies has
// the header and claims of a token we minted (only the signature's
// encoding may vary in bits base64 ignores).
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	secret := []byte("0123456789abcdef0123456789abcdef")
	ed := testissuer.NewKey(f, "ed", "EdDSA")
	path := filepath.Join(f.TempDir(), "jwks.json")
	if err := os.WriteFile(path, testissuer.JWKS(ed), 0o600); err != nil {
		f.Fatal(err)
	}
	hs, err := New(f.Context(), &Options{HS256Secret: secret, Now: clock})
	if err != nil {
		f.Fatal(err)
	}
	jw, err := New(f.Context(), &Options{Issuer: "https://id.example", Audience: "https://mcp.example/mcp", JWKS: path, Now: clock})
	if err != nil {
		f.Fatal(err)
	}
	defer jw.Close()
	c := testissuer.Claims{Issuer: "https://id.example", Subject: "alice", Audience: []string{"https://mcp.example/mcp"}, Scope: "a b", Expiry: now.Add(time.Minute)}
	minted := []string{testissuer.MintHS256(f, secret, "", c), testissuer.Mint(f, ed, c)}
	for _, m := range minted {
		f.Add(m)
	}
	f.Add(testissuer.Raw(map[string]any{"alg": "none"}, c.MapClaims(), nil))
	f.Add("e30.e30.")
	signed := func(tok string) string { return tok[:strings.LastIndexByte(tok, '.')] }
	f.Fuzz(func(t *testing.T, tok string) {
		for _, v := range []*Verifier{hs, jw} {
			got, err := v.Verify(t.Context(), tok)
			if err != nil {
				if !strings.HasPrefix(err.Error(), ErrInvalidToken.Error()) {
					t.Fatalf("error %v", err)
				}
				continue
			}
			if strings.Count(tok, ".") != 2 || (signed(tok) != signed(minted[0]) && signed(tok) != signed(minted[1])) {
				t.Fatalf("a token we did not mint verified: %+v", got)
			}
		}
	})
}

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "bearer x==", "Basic YTpi", "Bearer ", "Bearer a b", "BEARER  a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, st := parseAuthorization([]string{h})
		if st == hasToken && (tok == "" || !b64token(tok) || !strings.Contains(h, tok)) {
			t.Fatalf("%q gave token %q", h, tok)
		}
	})
}
