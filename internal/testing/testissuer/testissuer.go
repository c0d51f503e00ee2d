// Package testissuer is an in-process OAuth authorization server for
// tests: an httptest server on 127.0.0.1 that publishes a JWKS (RSA, EC
// P-256 and Ed25519 keys), OpenID and RFC 8414 discovery documents, counts
// the JWKS fetches it answers, can rotate its keys or go down, and mints
// tokens with any of its keys.
package testissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Key is one signing key of the issuer.
type Key struct {
	ID     string
	Alg    string // RS256, ES256 or EdDSA
	Signer crypto.Signer
}

// Issuer is a running test authorization server. Its methods are safe for
// concurrent use.
type Issuer struct {
	Server *httptest.Server
	// URL is the issuer identifier (the server's base URL).
	URL string

	mu        sync.Mutex
	keys      []*Key // published
	down      bool
	jwksHits  int
	discovery int
	changed   chan struct{} // closed and replaced on every JWKS fetch
}

// New starts an issuer publishing one RSA, one EC P-256 and one Ed25519
// key, with kids "rsa-1", "ec-1" and "ed-1". It stops with the test.
func New(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{changed: make(chan struct{})}
	is.keys = []*Key{NewKey(t, "rsa-1", "RS256"), NewKey(t, "ec-1", "ES256"), NewKey(t, "ed-1", "EdDSA")}
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", is.serveJWKS)
	mux.HandleFunc("/.well-known/openid-configuration", is.serveDiscovery)
	mux.HandleFunc("/.well-known/oauth-authorization-server", is.serveDiscovery)
	is.Server = httptest.NewServer(mux)
	// Under the lock: the handlers read it on the server's goroutines,
	// which the race detector cannot see started after this write when the
	// request comes from another process.
	is.mu.Lock()
	is.URL = is.Server.URL
	is.mu.Unlock()
	t.Cleanup(is.Server.Close)
	return is
}

// NewKey generates a key for alg (RS256, ES256 or EdDSA).
func NewKey(t testing.TB, id, alg string) *Key {
	t.Helper()
	var s crypto.Signer
	var err error
	switch alg {
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("testissuer: unknown alg %q", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &Key{ID: id, Alg: alg, Signer: s}
}

// JWKSURL is the URL of the issuer's JWKS.
func (is *Issuer) JWKSURL() string { return is.URL + "/jwks" }

// Key returns the published key with this id, or nil.
func (is *Issuer) Key(id string) *Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, k := range is.keys {
		if k.ID == id {
			return k
		}
	}
	return nil
}

// SetKeys replaces the published keys (a rotation).
func (is *Issuer) SetKeys(keys ...*Key) {
	is.mu.Lock()
	is.keys = keys
	is.mu.Unlock()
}

// SetDown makes the JWKS endpoint answer 503 (down) or work again.
func (is *Issuer) SetDown(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

// JWKSHits is how many JWKS requests the issuer received (down or not).
func (is *Issuer) JWKSHits() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.jwksHits
}

// DiscoveryHits is how many discovery documents the issuer served.
func (is *Issuer) DiscoveryHits() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.discovery
}

// NextFetch returns a channel closed after the next JWKS request was
// answered.
func (is *Issuer) NextFetch() <-chan struct{} {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.changed
}

// JWKS returns the JSON JWK Set of keys.
func JWKS(keys ...*Key) []byte {
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	set.Keys = []map[string]string{}
	for _, k := range keys {
		set.Keys = append(set.Keys, PublicJWK(k))
	}
	b, _ := json.Marshal(set)
	return b
}

// PublicJWK returns the public JWK of k (RFC 7517, RFC 7518 §6, RFC 8037).
func PublicJWK(k *Key) map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]string{"kid": k.ID, "use": "sig", "alg": k.Alg}
	switch pub := k.Signer.Public().(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		raw, _ := pub.Bytes() // 0x04 | x | y
		n := (len(raw) - 1) / 2
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", b64(raw[1:1+n]), b64(raw[1+n:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(pub)
	}
	return m
}

func (is *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	is.jwksHits++
	down, keys := is.down, is.keys
	done := is.changed
	is.changed = make(chan struct{})
	is.mu.Unlock()
	defer close(done)
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Write(JWKS(keys...))
}

func (is *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	is.discovery++
	base := is.URL
	is.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"issuer":                 base,
		"jwks_uri":               base + "/jwks",
		"authorization_endpoint": base + "/authorize",
		"token_endpoint":         base + "/token",
	})
}

// Claims are the claims of a minted token; Extra is merged in last.
type Claims struct {
	Issuer    string
	Subject   string
	Audience  []string
	Scope     string
	IssuedAt  time.Time
	NotBefore time.Time
	Expiry    time.Time
	Extra     map[string]any
}

// Claims returns claims for sub from this issuer to audience, valid from
// now for five minutes.
func (is *Issuer) Claims(sub, audience string, now time.Time) Claims {
	return Claims{Issuer: is.URL, Subject: sub, Audience: []string{audience}, IssuedAt: now, Expiry: now.Add(5 * time.Minute)}
}

// MapClaims renders c as JWT claims (zero fields left out).
func (c Claims) MapClaims() jwt.MapClaims {
	m := jwt.MapClaims{}
	if c.Issuer != "" {
		m["iss"] = c.Issuer
	}
	if c.Subject != "" {
		m["sub"] = c.Subject
	}
	if len(c.Audience) == 1 {
		m["aud"] = c.Audience[0]
	} else if len(c.Audience) > 1 {
		m["aud"] = c.Audience
	}
	if c.Scope != "" {
		m["scope"] = c.Scope
	}
	for name, t := range map[string]time.Time{"iat": c.IssuedAt, "nbf": c.NotBefore, "exp": c.Expiry} {
		if !t.IsZero() {
			m[name] = t.Unix()
		}
	}
	for k, v := range c.Extra {
		m[k] = v
	}
	return m
}

// Mint signs c with k, kid in the header.
func Mint(t testing.TB, k *Key, c Claims) string {
	t.Helper()
	method := jwt.GetSigningMethod(k.Alg)
	tok := jwt.NewWithClaims(method, c.MapClaims())
	tok.Header["kid"] = k.ID
	s, err := tok.SignedString(k.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MintHS256 signs c with HS256 under secret (kid optional).
func MintHS256(t testing.TB, secret []byte, kid string, c Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c.MapClaims())
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Raw assembles a token from a header and claims with the given signature
// bytes, for tokens no library would sign (alg none, forged headers).
func Raw(header, claims map[string]any, sig []byte) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return fmt.Sprintf("%s.%s.%s", enc.EncodeToString(h), enc.EncodeToString(c), enc.EncodeToString(sig))
}
