package bearer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults for the zero values of Options.
const (
	// DefaultLeeway is the clock skew tolerated on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultRefreshInterval is how often a JWKS URL is fetched again in
	// the background.
	DefaultRefreshInterval = 15 * time.Minute
	// DefaultFileCheckInterval is how often a JWKS file is checked for a
	// change (it is read again only when its modification time or size
	// changed).
	DefaultFileCheckInterval = 5 * time.Second
	// DefaultRefetchInterval bounds the fetches an unknown kid may cause:
	// at most one per interval, whatever the traffic.
	DefaultRefetchInterval = 30 * time.Second
	// DefaultFetchTimeout bounds one fetch of a JWKS or discovery document.
	DefaultFetchTimeout = 10 * time.Second
	// DefaultMaxTokenBytes is the longest token looked at; longer ones are
	// refused before any decoding.
	DefaultMaxTokenBytes = 16 << 10
	// MinHS256SecretBytes is the shortest HS256 secret accepted: as long as
	// the hash output (RFC 7518 §3.2).
	MinHS256SecretBytes = 32
)

// ErrInvalidToken is the one error for a token that does not verify:
// malformed, badly signed, signed by an unknown key or with another
// algorithm than its key's, expired, not yet valid, for another issuer or
// audience, or without a subject. The reason in the message (for logs) is
// one of a fixed set of words and never contains the token or a claim.
var ErrInvalidToken = errors.New("bearer: invalid token")

// ErrInsufficientScope is returned, with the verified token, when a valid
// token lacks a scope listed in Options.Scopes.
var ErrInsufficientScope = errors.New("bearer: insufficient scope")

// Options configures a Verifier. The keys come from exactly one of JWKS,
// HS256Secret, or (when both are empty) the discovery documents of Issuer.
type Options struct {
	// Issuer is the exact iss every token must carry. Required with JWKS
	// or discovery; with HS256Secret, empty means any issuer. For
	// discovery it may also be the URL of the issuer's
	// /.well-known/openid-configuration or oauth-authorization-server
	// document, which then names the issuer.
	Issuer string
	// Audience must be one of the token's aud values: the resource URI of
	// this server (RFC 8707), such as https://mcp.example.com/mcp. Required
	// with JWKS or discovery; with HS256Secret, empty means any audience.
	// When it is an http(s) URL it is also the resource of the RFC 9728
	// metadata.
	Audience string
	// JWKS is where the issuer's public keys are: an https URL (http only
	// to a loopback host) or a file path.
	JWKS string
	// HS256Secret selects the development mode: tokens signed with HS256
	// under this secret (at least MinHS256SecretBytes bytes) and nothing
	// else.
	HS256Secret []byte
	// Scopes must all be granted by every token (the space-separated
	// "scope" claim, or an "scp" array); a token missing one gets
	// ErrInsufficientScope (HTTP 403). Nil requires none. A scope is
	// matched whole: mcp:tools is not granted by mcp:tools-readonly.
	Scopes []string
	// RequireTyp refuses a token whose JOSE header does not say typ
	// "at+jwt" (or "application/at+jwt", in any case), as RFC 9068 §4
	// asks of a resource server: it keeps an ID token or another JWT the
	// issuer signed from passing as an access token. False, the default,
	// does not look at typ, because some issuers omit it.
	RequireTyp bool

	// Leeway is the clock skew tolerated on exp, nbf and iat. Zero means
	// DefaultLeeway; negative means none.
	Leeway time.Duration
	// RefreshInterval is how often the keys are loaded again in the
	// background. Zero means DefaultRefreshInterval for a URL and
	// DefaultFileCheckInterval for a file.
	RefreshInterval time.Duration
	// RefetchInterval bounds the fetches caused by unknown kids (at most
	// one started per interval) and is the retry delay after a failed
	// background refresh. Zero means DefaultRefetchInterval.
	RefetchInterval time.Duration
	// MaxTokenBytes is the longest token accepted; a longer one is refused
	// before it is decoded. Zero means DefaultMaxTokenBytes.
	MaxTokenBytes int
	// HTTPClient fetches JWKS and discovery documents. Nil means a client
	// with DefaultFetchTimeout.
	HTTPClient *http.Client
	// Now is the clock for token times and the refetch bound. Nil means
	// time.Now. (The background refresh runs on real timers.)
	Now func() time.Time
	// Logger receives key set loads and refresh failures, and (at debug
	// level) the reason a token was refused. Nil means no logging.
	Logger *slog.Logger
}

// Token is what a verified bearer token says about its caller.
type Token struct {
	// Principal is the token's iss and sub; never anonymous.
	Principal reqstate.Principal
	// Scopes are the scopes the token grants.
	Scopes []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// Verifier verifies bearer tokens. It is safe for concurrent use. Close it
// to stop its background refresh.
type Verifier struct {
	issuer, audience string
	scopes           []string
	requireTyp       bool
	maxToken         int
	now              func() time.Time
	leeway           time.Duration
	log              *slog.Logger
	parser           *jwt.Parser
	hsKey            []byte     // development mode
	keys             *keyLoader // JWKS mode
	metadataURL      string     // "" when Audience is not an http(s) URL
}

// New returns a Verifier. With a JWKS URL, a file or discovery it loads the
// keys before returning, bounded by ctx: a configuration that cannot load
// any key is an error now rather than a server that refuses everyone.
func New(ctx context.Context, opts *Options) (*Verifier, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	v := &Verifier{
		issuer:     o.Issuer,
		audience:   o.Audience,
		scopes:     slices.Clone(o.Scopes),
		requireTyp: o.RequireTyp,
		maxToken:   o.MaxTokenBytes,
		now:        o.Now,
		leeway:     o.Leeway,
		log:        o.Logger,
	}
	if v.maxToken <= 0 {
		v.maxToken = DefaultMaxTokenBytes
	}
	if v.now == nil {
		v.now = time.Now
	}
	switch {
	case v.leeway == 0:
		v.leeway = DefaultLeeway
	case v.leeway < 0:
		v.leeway = 0
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range v.scopes {
		if !validScope(s) {
			return nil, fmt.Errorf("bearer: scope %q is not a scope token (RFC 6749 §3.3)", s)
		}
	}
	if strings.ContainsAny(o.Issuer, "\"\\") || strings.ContainsAny(o.Audience, "\"\\") {
		return nil, errors.New("bearer: issuer and audience must not contain quotes or backslashes")
	}
	v.metadataURL = metadataURL(o.Audience)

	validMethods := []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
	if o.HS256Secret != nil {
		if o.JWKS != "" {
			return nil, errors.New("bearer: a JWKS and an HS256 secret exclude each other")
		}
		if len(o.HS256Secret) < MinHS256SecretBytes {
			return nil, fmt.Errorf("bearer: the HS256 secret is %d bytes; at least %d are required (RFC 7518 §3.2: as long as the hash)",
				len(o.HS256Secret), MinHS256SecretBytes)
		}
		v.hsKey = slices.Clone(o.HS256Secret)
		validMethods = []string{"HS256"}
	} else {
		if err := v.loadKeys(ctx, &o); err != nil {
			return nil, err
		}
	}

	popts := []jwt.ParserOption{
		jwt.WithValidMethods(validMethods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.leeway),
		jwt.WithTimeFunc(v.now),
	}
	if v.issuer != "" {
		popts = append(popts, jwt.WithIssuer(v.issuer))
	}
	if v.audience != "" {
		popts = append(popts, jwt.WithAudience(v.audience))
	}
	v.parser = jwt.NewParser(popts...)
	return v, nil
}

// loadKeys sets up the JWKS (from o.JWKS or discovery), loads it once and
// starts the background refresh.
func (v *Verifier) loadKeys(ctx context.Context, o *Options) error {
	if o.Issuer == "" || o.Audience == "" {
		return errors.New("bearer: verifying against a JWKS needs both an issuer (exact iss) and an audience (this server's resource URI)")
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if client.CheckRedirect == nil {
		// A redirect must not lead where a configured URL could not: keys
		// fetched in clear text from a network host could be anyone's.
		c := *client
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			return checkFetchURL(req.URL.String())
		}
		client = &c
	}
	refetch := o.RefetchInterval
	if refetch <= 0 {
		refetch = DefaultRefetchInterval
	}
	if o.JWKS != "" && isDiscoveryURL(o.Issuer) {
		return errors.New("bearer: the issuer names a discovery document, which is read only without a JWKS; give the issuer itself (its iss) or leave out the JWKS")
	}
	var src source
	refresh := o.RefreshInterval
	switch {
	case o.JWKS == "":
		iss, jwksURI, err := discover(ctx, client, o.Issuer)
		if err != nil {
			return fmt.Errorf("bearer: %w", err)
		}
		v.issuer = iss
		src = &urlSource{url: jwksURI, client: client}
	case strings.HasPrefix(o.JWKS, "https://"), strings.HasPrefix(o.JWKS, "http://"):
		if err := checkFetchURL(o.JWKS); err != nil {
			return fmt.Errorf("bearer: JWKS %w", err)
		}
		src = &urlSource{url: o.JWKS, client: client}
	default:
		src = &fileSource{path: o.JWKS}
		if refresh <= 0 {
			refresh = DefaultFileCheckInterval
		}
	}
	if refresh <= 0 {
		refresh = DefaultRefreshInterval
	}
	v.keys = newKeyLoader(src, v.now, refetch, DefaultFetchTimeout, v.log)
	if err := v.keys.refresh(ctx); err != nil {
		v.keys.close()
		return fmt.Errorf("bearer: load JWKS %s: %w", src, err)
	}
	v.keys.run(refresh, refetch)
	return nil
}

// Close stops the background refresh. Verify keeps working on the keys
// last loaded. Close is idempotent.
func (v *Verifier) Close() error {
	if v.keys != nil {
		v.keys.close()
	}
	return nil
}

// Refresh loads the keys now, ignoring the refetch bound (for a SIGHUP or
// an operator's command). A failure keeps the last good keys and is
// returned. In development mode it does nothing.
func (v *Verifier) Refresh(ctx context.Context) error {
	if v.keys == nil {
		return nil
	}
	return v.keys.refresh(ctx)
}

// Issuer returns the issuer tokens must carry (the discovered one when
// Options.Issuer named a discovery document).
func (v *Verifier) Issuer() string { return v.issuer }

// Audience returns the audience tokens must carry.
func (v *Verifier) Audience() string { return v.audience }

// Scopes returns the scopes every token must grant.
func (v *Verifier) Scopes() []string { return slices.Clone(v.scopes) }

// RequireTyp reports whether tokens must say typ at+jwt (Options.RequireTyp).
func (v *Verifier) RequireTyp() bool { return v.requireTyp }

// Leeway returns the clock skew tolerated on token times.
func (v *Verifier) Leeway() time.Duration { return v.leeway }

// claims are the claims read from a token.
type claims struct {
	jwt.RegisteredClaims
	Scope json.RawMessage `json:"scope"`
	Scp   json.RawMessage `json:"scp"`
}

// Verify checks token and returns what it says. Every failure is
// ErrInvalidToken, except a valid token lacking a required scope, which
// returns the token and ErrInsufficientScope. ctx bounds a key fetch an
// unknown kid may cause.
func (v *Verifier) Verify(ctx context.Context, token string) (*Token, error) {
	if token == "" {
		return nil, invalid("malformed")
	}
	if len(token) > v.maxToken {
		return nil, invalid("too long")
	}
	var c claims
	var refused string
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			refused = "crit header"
			return nil, errRefused
		}
		if v.requireTyp {
			if typ, _ := t.Header["typ"].(string); !accessTokenType(typ) {
				refused = "typ"
				return nil, errRefused
			}
		}
		if v.hsKey != nil {
			return v.hsKey, nil
		}
		kid, ok := t.Header["kid"].(string)
		if !ok && t.Header["kid"] != nil {
			refused = "malformed"
			return nil, errRefused
		}
		k, ok := v.keys.lookup(ctx, kid)
		if !ok {
			refused = "unknown key"
			return nil, errRefused
		}
		if t.Method.Alg() != k.alg {
			refused = "algorithm not the key's"
			return nil, errRefused
		}
		return k.pub, nil
	})
	if err != nil {
		if refused == "" {
			refused = reason(err)
		}
		return nil, invalid(refused)
	}
	if c.Subject == "" {
		return nil, invalid("no subject")
	}
	t := &Token{
		Principal: reqstate.Principal{Issuer: c.Issuer, Subject: c.Subject},
		Scopes:    parseScopes(c.Scope, c.Scp),
		Expiry:    c.ExpiresAt.Time,
	}
	for _, s := range v.scopes {
		if !slices.Contains(t.Scopes, s) {
			return t, ErrInsufficientScope
		}
	}
	return t, nil
}

var errRefused = errors.New("refused")

// accessTokenType reports whether typ names an RFC 9068 access token:
// "at+jwt", or the full media type "application/at+jwt" (RFC 7515 §4.1.9
// lets the "application/" prefix go); media types compare in any case.
func accessTokenType(typ string) bool {
	return strings.EqualFold(typ, "at+jwt") || strings.EqualFold(typ, "application/at+jwt")
}

func invalid(reason string) error { return fmt.Errorf("%w (%s)", ErrInvalidToken, reason) }

// reason names a golang-jwt failure with a fixed word: its messages may
// quote claims.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "not yet valid"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "issued in the future"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "audience"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "required claim missing"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "signature"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable"
	}
	return "malformed"
}

// parseScopes reads the RFC 9068 "scope" claim (a space-separated string)
// and the "scp" claim some issuers use (an array or a string). A string is
// split at spaces only (RFC 6749 §3.3: scope-tokens delimited by %x20), so
// a scope holding a tab or another white space stays one (invalid) scope
// and never grants the scopes around it.
func parseScopes(raws ...json.RawMessage) []string {
	var out []string
	for _, raw := range raws {
		if len(raw) == 0 {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			for _, f := range strings.Split(s, " ") {
				if f != "" {
					out = append(out, f)
				}
			}
			continue
		}
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			out = append(out, list...)
		}
	}
	return out
}

// validScope reports whether s is an RFC 6749 scope-token.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c == '"' || c == '\\' || c > 0x7e {
			return false
		}
	}
	return true
}

type ctxKey struct{}

// NewContext returns ctx carrying t.
func NewContext(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the verified token Handler put in ctx.
func FromContext(ctx context.Context) (*Token, bool) {
	t, ok := ctx.Value(ctxKey{}).(*Token)
	return t, ok && t != nil
}
