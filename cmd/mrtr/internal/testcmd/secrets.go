package testcmd

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
	"github.com/mrtr-go/mrtr/reqstate"
)

// DevSecret is an --auth-hs256-secret of the right length (32 bytes).
const DevSecret = "0123456789abcdef0123456789abcdef"

// SignJWT signs claims with secret by method.
func SignJWT(t testing.TB, secret string, claims jwt.MapClaims, method jwt.SigningMethod) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// GenKey is a new key with id.
func GenKey(t testing.TB, id string) reqstate.Key {
	t.Helper()
	k, err := reqstate.GenerateKey(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// WriteRing writes keys to path the way `mrtr keys` does (keyfile.Write:
// an atomic rename).
func WriteRing(t testing.TB, path string, keys ...reqstate.Key) {
	t.Helper()
	ring, err := reqstate.NewKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyfile.Write(path, ring); err != nil {
		t.Fatal(err)
	}
}

// SecretForms are prefixes of the texts a key's secret could leak as.
func SecretForms(keys ...reqstate.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, base64.StdEncoding.EncodeToString(k.Secret[:])[:16], base64.RawURLEncoding.EncodeToString(k.Secret[:])[:16],
			hex.EncodeToString(k.Secret[:])[:16])
	}
	return out
}
