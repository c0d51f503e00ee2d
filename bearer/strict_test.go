package bearer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/internal/testing/testissuer"
)

// mintWith signs c with k like testissuer.Mint, then sets header (a nil
// value deletes the entry: golang-jwt writes typ "JWT" by default).
func mintWith(t *testing.T, k *testissuer.Key, c testissuer.Claims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), c.MapClaims())
	tok.Header["kid"] = k.ID
	setHeader(tok, header)
	s, err := tok.SignedString(k.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mintHS256With is mintWith for the development mode.
func mintHS256With(t *testing.T, secret []byte, c testissuer.Claims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c.MapClaims())
	setHeader(tok, header)
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func setHeader(tok *jwt.Token, header map[string]any) {
	for name, val := range header {
		if val == nil {
			delete(tok.Header, name)
		} else {
			tok.Header[name] = val
		}
	}
}

// wantRefused fails unless err is ErrInvalidToken for the given reason.
func wantRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if !errors.Is(err, bearer.ErrInvalidToken) || !strings.HasSuffix(err.Error(), "("+reason+")") {
		t.Errorf("%s: %v, want %v (%s)", what, err, bearer.ErrInvalidToken, reason)
	}
}

// TestRequireTyp pins RFC 9068 §4: with RequireTyp a token must say typ
// at+jwt or application/at+jwt (in any case), so that an ID token or any
// other JWT of the issuer is no access token; without it typ is not
// looked at, since some issuers omit it.
func TestRequireTyp(t *testing.T) {
	strict := newFixture(t, func(o *bearer.Options) { o.RequireTyp = true })
	lax, err := bearer.New(t.Context(), &bearer.Options{Issuer: strict.iss.URL, Audience: audience, JWKS: strict.iss.JWKSURL(), Now: strict.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer lax.Close()
	if !strict.v.RequireTyp() || lax.RequireTyp() {
		t.Fatalf("RequireTyp: %v and %v", strict.v.RequireTyp(), lax.RequireTyp())
	}
	kids := []string{"rsa-1", "ec-1", "ed-1"}
	for i, tc := range []struct {
		typ    any // nil: no typ at all
		accept bool
	}{
		{nil, false},
		{"JWT", false},
		{"jwt", false},
		{"application/jwt", false},
		{"at+jwt ", false},
		{"application/at+jwt; x=1", false},
		{"text/at+jwt", false},
		{"at+jwt2", false},
		{"", false},
		{1, false},
		{[]string{"at+jwt"}, false},
		{"at+jwt", true},
		{"AT+JWT", true},
		{"At+Jwt", true},
		{"application/at+jwt", true},
		{"application/at+JWT", true},
		{"APPLICATION/AT+JWT", true},
	} {
		k := strict.iss.Key(kids[i%len(kids)])
		tok := mintWith(t, k, strict.claims("alice"), map[string]any{"typ": tc.typ})
		what := fmt.Sprintf("typ %#v (%s)", tc.typ, k.Alg)
		_, err := strict.v.Verify(t.Context(), tok)
		if tc.accept && err != nil {
			t.Errorf("%s required: %v", what, err)
		}
		if !tc.accept {
			wantRefused(t, what+" required", err, "typ")
		}
		if _, err := lax.Verify(t.Context(), tok); err != nil {
			t.Errorf("%s not required: %v", what, err)
		}
	}
	// Through the Handler: 401 invalid_token, the handler never runs.
	if rec, seen := call(strict.v, testissuer.Mint(t, strict.iss.Key("ed-1"), strict.claims("alice"))); rec.Code != 401 || seen != nil ||
		!strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer error="invalid_token"`) {
		t.Fatalf("typ JWT through the handler: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}

	// The development mode checks it too.
	secret := []byte("0123456789abcdef0123456789abcdef")
	dev, err := bearer.New(t.Context(), &bearer.Options{HS256Secret: secret, RequireTyp: true, Now: strict.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := testissuer.Claims{Subject: "alice", Expiry: strict.clock.Now().Add(time.Minute)}
	if _, err := dev.Verify(t.Context(), mintHS256With(t, secret, c, map[string]any{"typ": "at+jwt"})); err != nil {
		t.Errorf("HS256 at+jwt: %v", err)
	}
	_, err = dev.Verify(t.Context(), mintHS256With(t, secret, c, nil))
	wantRefused(t, "HS256 typ JWT", err, "typ")
}

// TestCritRefusedWhateverTheAlgorithm: no crit extension is understood,
// so a token naming one is refused, signed correctly by any key type (a
// token with a bogus signature would be refused anyway and could not tell
// a check that only runs in one mode).
func TestCritRefusedWhateverTheAlgorithm(t *testing.T) {
	f := newFixture(t, nil)
	crit := map[string]any{"crit": []string{"x-ext"}, "x-ext": true}
	for _, kid := range []string{"rsa-1", "ec-1", "ed-1"} {
		k := f.iss.Key(kid)
		plain := mintWith(t, k, f.claims("alice"), map[string]any{"x-ext": true})
		if _, err := f.v.Verify(t.Context(), plain); err != nil {
			t.Fatalf("%s without crit: %v", k.Alg, err)
		}
		_, err := f.v.Verify(t.Context(), mintWith(t, k, f.claims("alice"), crit))
		wantRefused(t, k.Alg+" with crit", err, "crit header")
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	dev, err := bearer.New(t.Context(), &bearer.Options{HS256Secret: secret, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := testissuer.Claims{Subject: "alice", Expiry: f.clock.Now().Add(time.Minute)}
	if _, err := dev.Verify(t.Context(), mintHS256With(t, secret, c, map[string]any{"x-ext": true})); err != nil {
		t.Fatalf("HS256 without crit: %v", err)
	}
	_, err = dev.Verify(t.Context(), mintHS256With(t, secret, c, crit))
	wantRefused(t, "HS256 with crit", err, "crit header")
}

// TestScopesMatchWhole: a required scope is granted only by a scope equal
// to it, in the space-separated scope claim or as an element of an scp
// array (or in an scp string), never by a longer scope containing it.
func TestScopesMatchWhole(t *testing.T) {
	f := newFixture(t, func(o *bearer.Options) { o.Scopes = []string{"mcp:tools"} })
	for _, tc := range []struct {
		name  string
		claim string // "scope" or "scp"
		value any
		grant bool
	}{
		{"exact", "scope", "mcp:tools", true},
		{"among others", "scope", "mcp:read mcp:tools openid", true},
		{"extra spaces", "scope", "  mcp:read  mcp:tools ", true},
		{"scp array", "scp", []string{"mcp:read", "mcp:tools"}, true},
		{"scp string", "scp", "mcp:read mcp:tools", true},
		{"longer scope", "scope", "mcp:tools-readonly", false},
		{"longer scope among others", "scope", "mcp:read mcp:tools-readonly", false},
		{"prefix", "scope", "xmcp:tools", false},
		{"suffix", "scope", "mcp:toolsx", false},
		{"shorter", "scope", "mcp:tool", false},
		{"case", "scope", "MCP:TOOLS", false},
		{"joined by a tab", "scope", "mcp:read\tmcp:tools", false},
		{"joined by a no-break space", "scope", "mcp:read\u00a0mcp:tools", false},
		{"scp array, longer", "scp", []string{"mcp:tools-readonly"}, false},
		{"scp array, one element with a space", "scp", []string{"mcp:read mcp:tools"}, false},
		{"scp string, longer", "scp", "mcp:tools-readonly", false},
		{"scope not a string", "scope", []int{1}, false},
	} {
		c := f.claims("alice")
		c.Extra = map[string]any{tc.claim: tc.value}
		tok := testissuer.Mint(t, f.iss.Key("ec-1"), c)
		got, err := f.v.Verify(t.Context(), tok)
		switch {
		case tc.grant && err != nil:
			t.Errorf("%s (%s %#v): %v", tc.name, tc.claim, tc.value, err)
		case !tc.grant && !errors.Is(err, bearer.ErrInsufficientScope):
			t.Errorf("%s (%s %#v): %v, want %v", tc.name, tc.claim, tc.value, err, bearer.ErrInsufficientScope)
		case !tc.grant && (got == nil || got.Principal.Subject != "alice"):
			t.Errorf("%s: the token is not returned with the insufficient scope: %+v", tc.name, got)
		}
		if rec, seen := call(f.v, tok); !tc.grant && (rec.Code != 403 || seen != nil) {
			t.Errorf("%s through the handler: %d", tc.name, rec.Code)
		}
	}
}

// TestMaxTokenBytes: a token longer than MaxTokenBytes is refused before
// it is decoded: a valid one is refused, and one with an unknown kid
// starts no key fetch.
func TestMaxTokenBytes(t *testing.T) {
	iss := testissuer.New(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	good := testissuer.Mint(t, iss.Key("ed-1"), iss.Claims("alice", audience, clock.Now()))
	newV := func(max int) *bearer.Verifier {
		v, err := bearer.New(t.Context(), &bearer.Options{Issuer: iss.URL, Audience: audience, JWKS: iss.JWKSURL(), Now: clock.Now, MaxTokenBytes: max})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	if _, err := newV(len(good)).Verify(t.Context(), good); err != nil {
		t.Fatalf("a token of exactly MaxTokenBytes: %v", err)
	}
	short := newV(len(good) - 1)
	_, err := short.Verify(t.Context(), good)
	wantRefused(t, "a valid token one byte over MaxTokenBytes", err, "too long")

	// The default bound, 16 KiB.
	def := newV(0)
	c := iss.Claims("alice", audience, clock.Now())
	c.Extra = map[string]any{"pad": strings.Repeat("p", bearer.DefaultMaxTokenBytes)}
	big := testissuer.Mint(t, iss.Key("ed-1"), c)
	_, err = def.Verify(t.Context(), big)
	wantRefused(t, fmt.Sprintf("a valid token of %d bytes", len(big)), err, "too long")

	// Refused before anything is decoded: an unknown kid, which would make
	// a token of allowed size fetch the keys, fetches nothing.
	clock.Advance(bearer.DefaultRefetchInterval)
	hits := iss.JWKSHits()
	c.Extra = map[string]any{"pad": strings.Repeat("p", len(good))}
	unknown := testissuer.Mint(t, testissuer.NewKey(t, "rsa-9", "RS256"), c)
	_, err = short.Verify(t.Context(), unknown)
	wantRefused(t, "an over-long token with an unknown kid", err, "too long")
	if got := iss.JWKSHits() - hits; got != 0 {
		t.Fatalf("an over-long token caused %d key fetches", got)
	}
}

// countingTransport counts the requests it carries.
type countingTransport struct {
	n    atomic.Int64
	base http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// TestKidFloodBoundedWhileJWKSDown: the refetch bound holds while the JWKS
// endpoint fails (an error status, a set without keys, nothing listening):
// a failed fetch counts like a good one, so a flood of ever new kids still
// costs at most one fetch per RefetchInterval, and the last good keys keep
// verifying.
func TestKidFloodBoundedWhileJWKSDown(t *testing.T) {
	for _, outage := range []string{"HTTP 503", "no usable key", "connection refused"} {
		t.Run(outage, func(t *testing.T) {
			iss := testissuer.New(t)
			clock := fakeclock.New(time.Unix(1_800_000_000, 0))
			keys := []*testissuer.Key{iss.Key("rsa-1"), iss.Key("ec-1"), iss.Key("ed-1")}
			jwks := iss.JWKSURL()
			var srv *httptest.Server
			if outage == "connection refused" {
				// A JWKS server of our own that we can stop.
				srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Write(testissuer.JWKS(keys...))
				}))
				jwks = srv.URL + "/jwks"
			}
			ct := &countingTransport{base: &http.Transport{DisableKeepAlives: true}}
			v, err := bearer.New(t.Context(), &bearer.Options{Issuer: iss.URL, Audience: audience, JWKS: jwks, Now: clock.Now, HTTPClient: &http.Client{Transport: ct}})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			switch outage {
			case "HTTP 503":
				iss.SetDown(true)
			case "no usable key":
				iss.SetKeys()
			case "connection refused":
				srv.Close()
			}
			// Make sure the endpoint does fail now.
			if err := v.Refresh(t.Context()); err == nil {
				t.Fatal("a refresh during the outage succeeded")
			}
			forger := testissuer.NewKey(t, "x", "ES256")
			var seq atomic.Int64
			flood := func() {
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for range 32 {
							k := &testissuer.Key{ID: fmt.Sprintf("random-%d", seq.Add(1)), Alg: "ES256", Signer: forger.Signer}
							if _, err := v.Verify(context.Background(), testissuer.Mint(t, k, iss.Claims("mallory", audience, clock.Now()))); !errors.Is(err, bearer.ErrInvalidToken) {
								t.Errorf("random kid: %v", err)
							}
						}
					})
				}
				wg.Wait()
			}
			start := ct.n.Load()
			flood() // the failed refresh just now started the interval
			if got := ct.n.Load() - start; got != 0 {
				t.Fatalf("256 random kids right after a failed fetch: %d fetches, want 0", got)
			}
			for round := int64(1); round <= 3; round++ {
				clock.Advance(bearer.DefaultRefetchInterval)
				flood()
				if got := ct.n.Load() - start; got != round {
					t.Fatalf("after %d intervals of floods against a failing endpoint: %d fetches, want %d", round, got, round)
				}
			}
			clock.Advance(bearer.DefaultRefetchInterval - time.Second)
			flood()
			if got := ct.n.Load() - start; got != 3 {
				t.Fatalf("flood inside the interval: %d fetches, want 3", got)
			}
			for _, k := range keys {
				if _, err := v.Verify(t.Context(), testissuer.Mint(t, k, iss.Claims("alice", audience, clock.Now()))); err != nil {
					t.Fatalf("%s during the outage: %v", k.ID, err)
				}
			}
		})
	}
}

// TestDiscoveredJWKSClearTextToNetworkHostRefused: a discovery document
// that names its jwks_uri (or, read from the document's own URL, its
// issuer) as http on a network host is refused before anything is sent
// there: keys fetched in clear text could be anyone's. An https jwks_uri
// passes that check (and then fails here only because the test dials
// nothing but the discovery server).
func TestDiscoveredJWKSClearTextToNetworkHostRefused(t *testing.T) {
	var doc atomic.Pointer[map[string]string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, (*doc.Load())["issuer"], (*doc.Load())["jwks_uri"])
	}))
	defer srv.Close()
	var mu sync.Mutex
	var dialled []string
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == srv.Listener.Addr().String() {
			return d.DialContext(ctx, network, addr)
		}
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		return nil, errors.New("test: no dialling")
	}}}
	const refused = "http is allowed only to a loopback host; use https"
	for _, tc := range []struct {
		issuer, docIssuer, jwksURI string
		want                       string
	}{
		{srv.URL, srv.URL, "http://jwks.example.invalid/jwks", "jwks_uri: \"http://jwks.example.invalid/jwks\": " + refused},
		{srv.URL, srv.URL, "http://192.0.2.7/jwks", "jwks_uri: \"http://192.0.2.7/jwks\": " + refused},
		{srv.URL, srv.URL, "http://[2001:db8::1]:8080/jwks", "jwks_uri: \"http://[2001:db8::1]:8080/jwks\": " + refused},
		{srv.URL, srv.URL, "http://idp.localhost/jwks", "jwks_uri: \"http://idp.localhost/jwks\": " + refused},
		{srv.URL + "/.well-known/openid-configuration", "http://id.example", srv.URL + "/jwks", "issuer: \"http://id.example\": " + refused},
		{srv.URL, srv.URL, "https://jwks.example.invalid/jwks", "test: no dialling"},
	} {
		doc.Store(&map[string]string{"issuer": tc.docIssuer, "jwks_uri": tc.jwksURI})
		mu.Lock()
		dialled = nil
		mu.Unlock()
		_, err := bearer.New(t.Context(), &bearer.Options{Issuer: tc.issuer, Audience: audience, HTTPClient: client})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("issuer %s, jwks_uri %s: %v, want %q", tc.docIssuer, tc.jwksURI, err, tc.want)
		}
		mu.Lock()
		if tc.want != "test: no dialling" && len(dialled) != 0 {
			t.Errorf("jwks_uri %s: dialled %v", tc.jwksURI, dialled)
		}
		mu.Unlock()
	}
}
