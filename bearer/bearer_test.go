package bearer_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
	"github.com/mrtr-go/mrtr/reqstate"
)

const audience = "http://127.0.0.1:8080/mcp"

type fixture struct {
	iss   *testissuer.Issuer
	clock *fakeclock.Clock
	v     *bearer.Verifier
}

func newFixture(t *testing.T, mod func(*bearer.Options)) *fixture {
	t.Helper()
	f := &fixture{iss: testissuer.New(t), clock: fakeclock.New(time.Unix(1_800_000_000, 0))}
	opts := &bearer.Options{Issuer: f.iss.URL, Audience: audience, JWKS: f.iss.JWKSURL(), Now: f.clock.Now}
	if mod != nil {
		mod(opts)
	}
	v, err := bearer.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	f.v = v
	return f
}

func (f *fixture) claims(sub string) testissuer.Claims {
	return f.iss.Claims(sub, audience, f.clock.Now())
}

// call sends token (none when "") through the verifier's Handler and
// returns the response and the principal the handler saw.
func call(v *bearer.Verifier, token string) (*httptest.ResponseRecorder, *bearer.Token) {
	var seen *bearer.Token
	h := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = bearer.FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, seen
}

func TestValidTokensGiveThePrincipal(t *testing.T) {
	f := newFixture(t, nil)
	for _, kid := range []string{"rsa-1", "ec-1", "ed-1"} {
		t.Run(kid, func(t *testing.T) {
			c := f.claims("alice")
			c.Scope = "mcp:tools mcp:read"
			rec, seen := call(f.v, testissuer.Mint(t, f.iss.Key(kid), c))
			if rec.Code != http.StatusNoContent {
				t.Fatalf("status %d, body %q, challenge %q", rec.Code, rec.Body, rec.Header().Get("WWW-Authenticate"))
			}
			want := reqstate.Principal{Issuer: f.iss.URL, Subject: "alice"}
			if seen == nil || seen.Principal != want {
				t.Fatalf("principal %+v, want %+v", seen, want)
			}
			if strings.Join(seen.Scopes, " ") != "mcp:tools mcp:read" || !seen.Expiry.Equal(c.Expiry) {
				t.Fatalf("token %+v", seen)
			}
		})
	}
}

func TestLeewayOnExpiry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.claims("alice")
	c.Expiry = f.clock.Now().Add(-10 * time.Second) // within the 30 s leeway
	if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, f.iss.Key("ec-1"), c)); err != nil {
		t.Fatalf("10 s past exp: %v", err)
	}
}

func rsaPublicPEM(t *testing.T, k *testissuer.Key) []byte {
	der, err := x509.MarshalPKIXPublicKey(k.Signer.(*rsa.PrivateKey).Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, func(o *bearer.Options) { o.Scopes = []string{"mcp:tools"} })
	now := f.clock.Now()
	meta := `resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"`
	rsaKey, ecKey := f.iss.Key("rsa-1"), f.iss.Key("ec-1")
	good := func() testissuer.Claims { c := f.claims("alice"); c.Scope = "mcp:tools"; return c }
	with := func(mod func(*testissuer.Claims)) testissuer.Claims { c := good(); mod(&c); return c }
	// An RSA key published under ec-1's kid would be an EC kid used with RS256.
	rsaUnderECKid := &testissuer.Key{ID: "ec-1", Alg: "RS256", Signer: rsaKey.Signer}
	stranger := testissuer.NewKey(t, "rsa-1", "RS256") // right kid, wrong key
	noneToken := testissuer.Raw(map[string]any{"alg": "none", "typ": "JWT", "kid": "rsa-1"}, good().MapClaims(), nil)
	noneNoKid := testissuer.Raw(map[string]any{"alg": "none"}, good().MapClaims(), nil)
	pubPEM := rsaPublicPEM(t, rsaKey)
	jwkN := []byte(testissuer.PublicJWK(rsaKey)["n"])

	cases := []struct {
		name   string
		token  string
		status int
		header string
	}{
		{"no token", "", 401, `Bearer ` + meta + `, scope="mcp:tools"`},
		{"wrong issuer", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Issuer = "https://evil.example" })), 401, ""},
		{"issuer differs by a slash", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Issuer += "/" })), 401, ""},
		{"wrong audience", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Audience = []string{"http://127.0.0.1:9090/mcp"} })), 401, ""},
		{"no audience", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Audience = nil })), 401, ""},
		{"expired", testissuer.Mint(t, ecKey, with(func(c *testissuer.Claims) { c.Expiry = now.Add(-time.Minute) })), 401, ""},
		{"no exp", testissuer.Mint(t, ecKey, with(func(c *testissuer.Claims) { c.Expiry = time.Time{} })), 401, ""},
		{"not yet valid", testissuer.Mint(t, ecKey, with(func(c *testissuer.Claims) { c.NotBefore = now.Add(2 * time.Minute) })), 401, ""},
		{"issued in the future", testissuer.Mint(t, ecKey, with(func(c *testissuer.Claims) { c.IssuedAt = now.Add(2 * time.Minute) })), 401, ""},
		{"unknown kid", testissuer.Mint(t, testissuer.NewKey(t, "rsa-9", "RS256"), good()), 401, ""},
		{"right kid, another key", testissuer.Mint(t, stranger, good()), 401, ""},
		{"kid of another key type", testissuer.Mint(t, rsaUnderECKid, good()), 401, ""},
		{"PS256 with the RS256 key", testissuer.Mint(t, &testissuer.Key{ID: "rsa-1", Alg: "PS256", Signer: rsaKey.Signer}, good()), 401, ""},
		{"alg none", noneToken, 401, ""},
		{"alg none without kid", noneNoKid, 401, ""},
		{"HS256 keyed with the RSA public key (PEM)", testissuer.MintHS256(t, pubPEM, "rsa-1", good()), 401, ""},
		{"HS256 keyed with the RSA modulus", testissuer.MintHS256(t, jwkN, "rsa-1", good()), 401, ""},
		{"missing sub", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Subject = "" })), 401, ""},
		{"crit header", testissuer.Raw(map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": []string{"x"}, "x": 1}, good().MapClaims(), []byte("sig")), 401, ""},
		{"garbage", "not.a.jwt", 401, ""},
		{"missing scope", testissuer.Mint(t, rsaKey, with(func(c *testissuer.Claims) { c.Scope = "mcp:read" })), 403,
			`Bearer error="insufficient_scope", ` + meta + `, scope="mcp:tools"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, seen := call(f.v, tc.token)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if seen != nil {
				t.Fatal("the handler ran")
			}
			want := tc.header
			if want == "" {
				want = `Bearer error="invalid_token", ` + meta + `, scope="mcp:tools"`
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != want {
				t.Fatalf("WWW-Authenticate\n got %s\nwant %s", got, want)
			}
			if tc.token != "" && strings.Contains(rec.Body.String(), tc.token) {
				t.Fatal("the body echoes the token")
			}
			if tc.token == "" {
				return
			}
			_, err := f.v.Verify(t.Context(), tc.token)
			wantErr := bearer.ErrInvalidToken
			if tc.status == 403 {
				wantErr = bearer.ErrInsufficientScope
			}
			if !errors.Is(err, wantErr) {
				t.Fatalf("Verify: %v, want %v", err, wantErr)
			}
			if strings.Contains(err.Error(), tc.token) || strings.Contains(err.Error(), "alice") {
				t.Fatalf("the error %q holds the token or a claim", err)
			}
		})
	}
}

func TestMalformedAuthorizationHeader(t *testing.T) {
	f := newFixture(t, nil)
	h := f.v.Handler(http.NotFoundHandler())
	for _, hdr := range [][]string{{"Bearer"}, {"Bearer a b"}, {"Bearer a,b"}, {"Bearer x", "Bearer y"}} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header["Authorization"] = hdr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 400 || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer error="invalid_request"`) {
			t.Errorf("%q: status %d, %q", hdr, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	// Another scheme is no bearer token at all: a plain challenge.
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.SetBasicAuth("alice", "pw")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || strings.Contains(rec.Header().Get("WWW-Authenticate"), "error=") {
		t.Errorf("basic auth: status %d, %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

func TestKeyRotationWithoutRestart(t *testing.T) {
	f := newFixture(t, nil)
	old := f.iss.Key("rsa-1")
	next := testissuer.NewKey(t, "rsa-2", "RS256")
	f.iss.SetKeys(old, next) // the issuer publishes the new key, then signs with it
	f.clock.Advance(bearer.DefaultRefetchInterval)
	hits := f.iss.JWKSHits()
	if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, next, f.claims("alice"))); err != nil {
		t.Fatalf("token under the rotated-in key: %v", err)
	}
	if got := f.iss.JWKSHits() - hits; got != 1 {
		t.Fatalf("%d fetches for the new kid, want 1", got)
	}
	// The old key is withdrawn: after a refresh its tokens are refused.
	f.iss.SetKeys(next)
	if err := f.v.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, old, f.claims("alice"))); !errors.Is(err, bearer.ErrInvalidToken) {
		t.Fatalf("token under the withdrawn key: %v", err)
	}
}

func TestEndpointDownKeepsLastKeys(t *testing.T) {
	f := newFixture(t, nil)
	f.iss.SetDown(true)
	// The whole phrase: a bare "503" would also match the port in the URL.
	if err := f.v.Refresh(t.Context()); err == nil || !strings.HasSuffix(err.Error(), "/jwks: HTTP status 503") {
		t.Fatalf("refresh against a down endpoint: %v", err)
	}
	// An unknown kid while down: a fetch (which fails), and the old keys stay.
	f.clock.Advance(bearer.DefaultRefetchInterval)
	hits := f.iss.JWKSHits()
	if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, testissuer.NewKey(t, "ec-9", "ES256"), f.claims("alice"))); !errors.Is(err, bearer.ErrInvalidToken) {
		t.Fatalf("unknown kid: %v", err)
	}
	if f.iss.JWKSHits() != hits+1 {
		t.Fatalf("unknown kid while down: %d fetches, want 1", f.iss.JWKSHits()-hits)
	}
	for _, kid := range []string{"rsa-1", "ec-1", "ed-1"} {
		if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, f.iss.Key(kid), f.claims("alice"))); err != nil {
			t.Fatalf("%s while the JWKS endpoint is down: %v", kid, err)
		}
	}
}

func TestKidFloodCausesBoundedFetches(t *testing.T) {
	f := newFixture(t, nil)
	forger := testissuer.NewKey(t, "x", "ES256")
	flood := func() {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 64 {
					k := &testissuer.Key{ID: fmt.Sprintf("random-%d-%d", g, i), Alg: "ES256", Signer: forger.Signer}
					if _, err := f.v.Verify(context.Background(), testissuer.Mint(t, k, f.claims("mallory"))); !errors.Is(err, bearer.ErrInvalidToken) {
						t.Errorf("random kid: %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	start := f.iss.JWKSHits() // the load in New
	flood()                   // the clock has not moved since that load: no fetch at all
	if got := f.iss.JWKSHits() - start; got != 0 {
		t.Fatalf("1024 random kids right after the load: %d fetches, want 0", got)
	}
	for round := 1; round <= 3; round++ {
		f.clock.Advance(bearer.DefaultRefetchInterval)
		flood()
		if got := f.iss.JWKSHits() - start; got != round {
			t.Fatalf("after %d intervals of floods: %d fetches, want %d", round, got, round)
		}
	}
	// Inside one interval, still nothing more.
	f.clock.Advance(bearer.DefaultRefetchInterval - time.Second)
	flood()
	if got := f.iss.JWKSHits() - start; got != 3 {
		t.Fatalf("flood inside the interval: %d fetches, want 3", got)
	}
	// And a real token still passes.
	if _, err := f.v.Verify(t.Context(), testissuer.Mint(t, f.iss.Key("ed-1"), f.claims("alice"))); err != nil {
		t.Fatal(err)
	}
}

func writeJWKS(t *testing.T, path string, mtime time.Time, keys ...*testissuer.Key) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, testissuer.JWKS(keys...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileJWKSReloadsOnChange(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	path := filepath.Join(t.TempDir(), "jwks.json")
	a, b := testissuer.NewKey(t, "a", "EdDSA"), testissuer.NewKey(t, "b", "ES256")
	writeJWKS(t, path, clock.Now(), a)
	v, err := bearer.New(t.Context(), &bearer.Options{Issuer: "https://id.example", Audience: audience, JWKS: path, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	claims := testissuer.Claims{Issuer: "https://id.example", Subject: "alice", Audience: []string{audience}, Expiry: clock.Now().Add(time.Hour)}
	if _, err := v.Verify(t.Context(), testissuer.Mint(t, a, claims)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), testissuer.Mint(t, b, claims)); !errors.Is(err, bearer.ErrInvalidToken) {
		t.Fatalf("b before it is in the file: %v", err)
	}
	writeJWKS(t, path, clock.Now().Add(time.Second), b)
	clock.Advance(bearer.DefaultRefetchInterval)
	if _, err := v.Verify(t.Context(), testissuer.Mint(t, b, claims)); err != nil {
		t.Fatalf("b after the file changed: %v", err)
	}
	if _, err := v.Verify(t.Context(), testissuer.Mint(t, a, claims)); !errors.Is(err, bearer.ErrInvalidToken) {
		t.Fatalf("a after it left the file: %v", err)
	}
	// A half-written file keeps the last good set.
	if err := os.WriteFile(path, []byte(`{"keys":[{"kty":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(t.Context()); err == nil {
		t.Fatal("a broken file refreshed without error")
	}
	if _, err := v.Verify(t.Context(), testissuer.Mint(t, b, claims)); err != nil {
		t.Fatalf("b after a broken write: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	iss := testissuer.New(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	for _, issuer := range []string{iss.URL, iss.URL + "/.well-known/openid-configuration"} {
		v, err := bearer.New(t.Context(), &bearer.Options{Issuer: issuer, Audience: audience, Now: clock.Now})
		if err != nil {
			t.Fatalf("%s: %v", issuer, err)
		}
		if v.Issuer() != iss.URL {
			t.Fatalf("discovered issuer %q", v.Issuer())
		}
		tok := testissuer.Mint(t, iss.Key("ed-1"), iss.Claims("alice", audience, clock.Now()))
		if got, err := v.Verify(t.Context(), tok); err != nil || got.Principal.Issuer != iss.URL {
			t.Fatalf("%s: %+v %v", issuer, got, err)
		}
		if m := v.Metadata(); len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != iss.URL {
			t.Fatalf("metadata %+v", m)
		}
		v.Close()
	}
	if iss.DiscoveryHits() != 2 {
		t.Fatalf("%d discovery documents fetched, want 2", iss.DiscoveryHits())
	}
	// A document naming another issuer is refused: keys are trusted only
	// for the issuer that published them.
	other := strings.Replace(iss.URL, "127.0.0.1", "localhost", 1)
	_, err := bearer.New(t.Context(), &bearer.Options{Issuer: other, Audience: audience})
	if err == nil || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("discovery of an issuer the document does not name: %v", err)
	}
	// An issuer with a path: the three well-known places are tried in turn.
	before := iss.DiscoveryHits()
	_, err = bearer.New(t.Context(), &bearer.Options{Issuer: iss.URL + "/tenant", Audience: audience})
	if err == nil || iss.DiscoveryHits() != before {
		t.Fatalf("issuer with a path nobody serves: %v", err)
	}
	// Each place named with its whole status phrase: a bare "404" would
	// also count the port in the URLs.
	if got := strings.Count(err.Error(), ": HTTP status 404"); got != 3 {
		t.Fatalf("issuer with a path nobody serves: %d refusals with 404, want 3: %v", got, err)
	}
	for _, place := range []string{
		iss.URL + "/.well-known/oauth-authorization-server/tenant",
		iss.URL + "/.well-known/openid-configuration/tenant",
		iss.URL + "/tenant/.well-known/openid-configuration",
	} {
		if !strings.Contains(err.Error(), "GET "+place+": HTTP status 404") {
			t.Errorf("%s not tried (or not with 404): %v", place, err)
		}
	}
}

// A JWKS URL that redirects to clear text on a network host is refused
// before anything is sent there.
func TestRedirectToClearTextRefused(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://jwks.example.invalid/jwks", http.StatusFound))
	defer srv.Close()
	_, err := bearer.New(t.Context(), &bearer.Options{Issuer: "https://id.example", Audience: audience, JWKS: srv.URL + "/jwks"})
	if err == nil || !strings.Contains(err.Error(), "http is allowed only to a loopback host") {
		t.Fatalf("redirect to http on a network host: %v", err)
	}
}

func TestConfigurationRules(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		name string
		opts bearer.Options
		want string
	}{
		{"short HS256 secret", bearer.Options{HS256Secret: make([]byte, 31)}, "at least 32"},
		{"JWKS and HS256", bearer.Options{HS256Secret: make([]byte, 32), JWKS: "x.json", Issuer: "i", Audience: "a"}, "exclude"},
		{"JWKS without audience", bearer.Options{JWKS: "https://id.example/jwks", Issuer: "https://id.example"}, "audience"},
		{"JWKS without issuer", bearer.Options{JWKS: "https://id.example/jwks", Audience: audience}, "issuer"},
		{"nothing at all", bearer.Options{}, "issuer"},
		{"discovery document and a JWKS", bearer.Options{JWKS: "jwks.json", Issuer: "https://id.example/.well-known/openid-configuration", Audience: audience}, "discovery document"},
		{"clear-text JWKS URL", bearer.Options{JWKS: "http://id.example/jwks", Issuer: "https://id.example", Audience: audience}, "https"},
		{"missing file", bearer.Options{JWKS: filepath.Join(t.TempDir(), "none.json"), Issuer: "i", Audience: "a"}, "no such file"},
		{"bad scope", bearer.Options{HS256Secret: make([]byte, 32), Scopes: []string{"a b"}}, "scope"},
	}
	for _, tc := range cases {
		_, err := bearer.New(ctx, &tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

func TestHS256Development(t *testing.T) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := bearer.New(t.Context(), &bearer.Options{HS256Secret: secret, Issuer: "dev", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := testissuer.Claims{Issuer: "dev", Subject: "alice", Expiry: clock.Now().Add(time.Minute)}
	got, err := v.Verify(t.Context(), testissuer.MintHS256(t, secret, "", c))
	if err != nil || got.Principal != (reqstate.Principal{Issuer: "dev", Subject: "alice"}) {
		t.Fatalf("%+v %v", got, err)
	}
	other := testissuer.MintHS256(t, []byte("ffffffffffffffffffffffffffffffff"), "", c)
	asym := testissuer.Mint(t, testissuer.NewKey(t, "k", "EdDSA"), c)
	c.Issuer = "prod"
	wrongIss := testissuer.MintHS256(t, secret, "", c)
	for name, tok := range map[string]string{"other secret": other, "EdDSA in HS256 mode": asym, "wrong issuer": wrongIss} {
		if _, err := v.Verify(t.Context(), tok); !errors.Is(err, bearer.ErrInvalidToken) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// No audience URL: no metadata, a realm instead.
	if v.MetadataURL() != "" || v.MetadataPaths() != nil {
		t.Fatalf("metadata %q", v.MetadataURL())
	}
	if rec, _ := call(v, ""); rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != `Bearer realm="mrtr"` {
		t.Fatalf("%d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

func TestMetadata(t *testing.T) {
	f := newFixture(t, func(o *bearer.Options) { o.Scopes = []string{"mcp:tools", "mcp:read"} })
	if got := f.v.MetadataURL(); got != "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("metadata URL %q", got)
	}
	if got := f.v.MetadataPaths(); strings.Join(got, " ") != "/.well-known/oauth-protected-resource/mcp /.well-known/oauth-protected-resource" {
		t.Fatalf("paths %q", got)
	}
	rec := httptest.NewRecorder()
	f.v.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 audience,
		"authorization_servers":    []any{f.iss.URL},
		"scopes_supported":         []any{"mcp:tools", "mcp:read"},
		"bearer_methods_supported": []any{"header"},
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("metadata\n got %v\nwant %v", m, want)
	}
	rec = httptest.NewRecorder()
	f.v.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/.well-known/oauth-protected-resource", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}
}
