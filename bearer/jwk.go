package bearer

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// A JWKS is untrusted input even from the right URL (a misconfigured
// proxy, a compromised CDN), so its parser is small, strict and fuzzed
// (FuzzParseJWKS). It turns public keys into the standard library's key
// types; the signature checks themselves are golang-jwt's.
//
// Each key carries the one algorithm it may verify. The algorithm comes
// from the key (its kty and crv, and its "alg" member when present), never
// from the token: a token whose header names another algorithm than its
// key's is refused, so `none`, HS256-with-a-public-key and RS/PS or
// EC-curve confusion cannot happen. Symmetric ("oct") keys in a JWKS are
// ignored: a shared secret has no business in a public document.

// Limits on what a key set may hold.
const (
	maxKeys        = 64   // keys per set; the rest are ignored
	minRSABits     = 2048 // RFC 7518 §3.3
	maxRSABits     = 8192 // bounds the cost of one verification
	maxDocumentLen = 1 << 20
)

// verifyKey is one usable public key and the algorithm it verifies.
type verifyKey struct {
	kid string
	alg string
	pub any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// keySet is an immutable set of verification keys by kid.
type keySet struct {
	byKid   map[string]verifyKey
	skipped int // keys present in the document but not usable
}

// lookup returns the key a token with this kid must be verified with. A
// token without kid is accepted only when the set holds exactly one key.
func (s *keySet) lookup(kid string) (verifyKey, bool) {
	if s == nil {
		return verifyKey{}, false
	}
	if kid == "" {
		if len(s.byKid) == 1 {
			for _, k := range s.byKid {
				return k, true
			}
		}
		return verifyKey{}, false
	}
	k, ok := s.byKid[kid]
	return k, ok
}

// kids lists the set's key ids, sorted (for logs).
func (s *keySet) kids() []string {
	ids := make([]string, 0, len(s.byKid))
	for id := range s.byKid {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

type rawJWK struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

var errNotJWKS = errors.New("not a JWK Set (RFC 7517 §5): no \"keys\" array")

// parseJWKS decodes a JWK Set. A document that is not a JWK Set, or holds
// no usable key, is an error; keys that cannot be used (another use, an
// unsupported type, bad material, an ambiguous kid) are skipped and
// counted.
func parseJWKS(data []byte) (*keySet, error) {
	if len(data) > maxDocumentLen {
		return nil, fmt.Errorf("JWK Set larger than %d bytes", maxDocumentLen)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode JWK Set: %w", err)
	}
	if doc.Keys == nil {
		return nil, errNotJWKS
	}
	s := &keySet{byKid: make(map[string]verifyKey)}
	ambiguous := map[string]bool{}
	for i, raw := range doc.Keys {
		if i >= maxKeys {
			s.skipped += len(doc.Keys) - maxKeys
			break
		}
		var j rawJWK
		if err := json.Unmarshal(raw, &j); err != nil {
			s.skipped++
			continue
		}
		k, ok := j.key()
		if !ok {
			s.skipped++
			continue
		}
		if _, dup := s.byKid[k.kid]; dup || ambiguous[k.kid] {
			// Two keys under one kid: which one a token meant is unknowable,
			// so neither is used.
			if dup {
				delete(s.byKid, k.kid)
				s.skipped++
			}
			ambiguous[k.kid] = true
			s.skipped++
			continue
		}
		s.byKid[k.kid] = k
	}
	if len(s.byKid) == 0 {
		// An issuer always publishes a signing key; a set without one is a
		// misconfiguration or a broken response, not a revocation of all.
		return nil, fmt.Errorf("JWK Set has no usable signing key (%d skipped)", s.skipped)
	}
	return s, nil
}

// key converts one JWK into a verification key, or reports it unusable.
func (j *rawJWK) key() (verifyKey, bool) {
	if j.Use != "" && j.Use != "sig" {
		return verifyKey{}, false
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return verifyKey{}, false
	}
	k := verifyKey{kid: j.Kid}
	switch j.Kty {
	case "RSA":
		switch j.Alg {
		case "":
			k.alg = "RS256"
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			k.alg = j.Alg
		default:
			return verifyKey{}, false
		}
		pub, ok := rsaKey(j.N, j.E)
		if !ok {
			return verifyKey{}, false
		}
		k.pub = pub
	case "EC":
		var curve elliptic.Curve
		switch j.Crv {
		case "P-256":
			curve, k.alg = elliptic.P256(), "ES256"
		case "P-384":
			curve, k.alg = elliptic.P384(), "ES384"
		case "P-521":
			curve, k.alg = elliptic.P521(), "ES512"
		default:
			return verifyKey{}, false
		}
		if j.Alg != "" && j.Alg != k.alg {
			return verifyKey{}, false
		}
		size := (curve.Params().BitSize + 7) / 8
		x, okx := decodeB64(j.X)
		y, oky := decodeB64(j.Y)
		// RFC 7518 §6.2.1.2: coordinates are full-length octet strings.
		if !okx || !oky || len(x) != size || len(y) != size {
			return verifyKey{}, false
		}
		point := make([]byte, 0, 1+2*size)
		point = append(append(append(point, 4), x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return verifyKey{}, false
		}
		k.pub = pub
	case "OKP":
		if j.Crv != "Ed25519" || (j.Alg != "" && j.Alg != "EdDSA") {
			return verifyKey{}, false
		}
		x, ok := decodeB64(j.X)
		if !ok || len(x) != ed25519.PublicKeySize {
			return verifyKey{}, false
		}
		k.alg, k.pub = "EdDSA", ed25519.PublicKey(x)
	default:
		// "oct" (shared secrets) and anything unknown.
		return verifyKey{}, false
	}
	return k, true
}

func rsaKey(n64, e64 string) (*rsa.PublicKey, bool) {
	nb, okn := decodeB64(n64)
	eb, oke := decodeB64(e64)
	if !okn || !oke || len(nb) == 0 || len(eb) == 0 || len(eb) > 4 || len(nb) > maxRSABits/8+1 {
		return nil, false
	}
	n := new(big.Int).SetBytes(nb)
	if n.BitLen() < minRSABits || n.BitLen() > maxRSABits {
		return nil, false
	}
	e := 0
	for _, b := range eb {
		e = e<<8 | int(b)
	}
	if e < 3 || e%2 == 0 {
		return nil, false
	}
	return &rsa.PublicKey{N: n, E: e}, true
}

// decodeB64 decodes base64url without padding (RFC 7515 §2), tolerating
// padding some issuers add anyway.
func decodeB64(s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	return b, err == nil
}
