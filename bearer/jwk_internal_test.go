package bearer

import (
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

func TestParseJWKSSkipsWhatCannotBeUsed(t *testing.T) {
	good := testissuer.PublicJWK(testissuer.NewKey(t, "ok", "ES256"))
	ed := testissuer.PublicJWK(testissuer.NewKey(t, "ed", "EdDSA"))
	rsa := testissuer.PublicJWK(testissuer.NewKey(t, "rsa", "RS256"))
	with := func(m map[string]string, kv ...string) string {
		c := map[string]string{}
		for k, v := range m {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(c, kv[i])
			} else {
				c[kv[i]] = kv[i+1]
			}
		}
		var b strings.Builder
		b.WriteString("{")
		first := true
		for k, v := range c {
			if !first {
				b.WriteString(",")
			}
			first = false
			b.WriteString(`"` + k + `":"` + v + `"`)
		}
		b.WriteString("}")
		return b.String()
	}
	cases := map[string]string{
		"oct key":                `{"kty":"oct","kid":"x","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}`,
		"encryption key":         with(good, "kid", "x", "use", "enc"),
		"EC with RSA alg":        with(good, "kid", "x", "alg", "RS256"),
		"EC on P-256K":           with(good, "kid", "x", "crv", "secp256k1"),
		"EC point off curve":     with(good, "kid", "x", "y", good["x"]),
		"short EC coordinate":    with(good, "kid", "x", "x", good["x"][2:]),
		"Ed448":                  with(ed, "kid", "x", "crv", "Ed448"),
		"EdDSA with RS alg":      with(ed, "kid", "x", "alg", "RS256"),
		"RSA with HS alg":        with(rsa, "kid", "x", "alg", "HS256"),
		"RSA 1024 bits":          with(rsa, "kid", "x", "n", rsa["n"][:171]),
		"RSA even exponent":      with(rsa, "kid", "x", "e", "AQAA"),
		"key_ops without verify": `{"kty":"OKP","crv":"Ed25519","kid":"x","x":"` + ed["x"] + `","key_ops":["sign"]}`,
	}
	for name, k := range cases {
		s, err := parseJWKS([]byte(`{"keys":[` + with(good) + `,` + k + `]}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := s.lookup("x"); ok || s.skipped != 1 {
			t.Errorf("%s: usable (skipped %d)", name, s.skipped)
		}
		if _, ok := s.lookup("ok"); !ok {
			t.Errorf("%s: the good key was lost", name)
		}
		if _, err := parseJWKS([]byte(`{"keys":[` + k + `]}`)); err == nil {
			t.Errorf("%s alone: a set with no usable key loaded", name)
		}
	}
	// Two keys under one kid: neither is used.
	s, err := parseJWKS([]byte(`{"keys":[` + with(good) + `,` + with(ed, "kid", "dup") + `,` + with(rsa, "kid", "dup") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.lookup("dup"); ok {
		t.Error("an ambiguous kid is usable")
	}
	// No kid in the token: only with a single-key set.
	three, _ := parseJWKS([]byte(`{"keys":[` + with(good) + `,` + with(ed) + `,` + with(rsa) + `]}`))
	if len(three.byKid) != 3 {
		t.Fatalf("%d keys of 3", len(three.byKid))
	}
	if _, ok := three.lookup(""); ok {
		t.Error("a kid-less token matched a set of several keys")
	}
	one, _ := parseJWKS([]byte(`{"keys":[` + with(good) + `]}`))
	if k, ok := one.lookup(""); !ok || k.kid != "ok" {
		t.Error("a kid-less token did not match the only key")
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"keys":{}}`, `{"keys":[]}`, `{"keys":[1]}`} {
		if _, err := parseJWKS([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
