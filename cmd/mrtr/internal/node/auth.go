package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mrtr-go/mrtr/bearer"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/gosdk"
)

// AuthConfig is the --auth-* flags, shared by every command that serves
// MCP over HTTP. Without any, every caller is anonymous.
type AuthConfig struct {
	jwks     string // URL or file; "" with issuer: discovery
	issuer   string
	audience string
	scopes   string // space or comma separated
	hs256    string // development secret
	typ      bool   // require typ at+jwt (RFC 9068)
}

// authFlags registers the --auth-* flags.
func authFlags(f *base.Flags, c *AuthConfig) {
	f.String(base.GroupAuth, &c.jwks, "auth-jwks", "", "require a bearer JWT (RS256, ES256, EdDSA...) signed by a key of this JWKS `URL|FILE` (https, or http to loopback; a file is reloaded when it changes); "+
		"needs --auth-issuer and --auth-audience. Without it, --auth-issuer is discovered (RFC 8414 /.well-known/oauth-authorization-server, then OpenID /.well-known/openid-configuration) for its jwks_uri")
	f.String(base.GroupAuth, &c.issuer, "auth-issuer", "", "the exact iss of accepted tokens, named as the authorization server in the RFC 9728 metadata; "+
		"may be the URL of the issuer's discovery document itself. With --auth-hs256-secret: optional, require this iss")
	f.String(base.GroupAuth, &c.audience, "auth-audience", "", "this server's resource `URI` (RFC 8707), which every token's aud must contain, e.g. https://mcp.example.com/mcp; "+
		"RFC 9728 metadata is served at its /.well-known/oauth-protected-resource path. Optional with --auth-hs256-secret")
	f.String(base.GroupAuth, &c.scopes, "auth-scopes", "", "scopes every call needs (space or comma separated); a token without them gets 403 insufficient_scope")
	f.Bool(base.GroupAuth, &c.typ, "auth-require-typ", false, "refuse a token whose header does not say typ at+jwt (or application/at+jwt), as RFC 9068 asks, "+
		"so an ID token or another JWT of the issuer is no access token. Off by default: some issuers omit typ")
	f.String(base.GroupAuth, &c.hs256, "auth-hs256-secret", "", fmt.Sprintf("development only: require a bearer JWT signed with this HS256 secret, at least %d bytes (sub and exp checked)", bearer.MinHS256SecretBytes))
	f.Check("auth-hs256-secret", c.check)
}

// Enabled reports whether any --auth-* flag asks for tokens.
func (c *AuthConfig) Enabled() bool {
	return c.jwks != "" || c.issuer != "" || c.audience != "" || c.scopes != "" || c.hs256 != "" || c.typ
}

func (c *AuthConfig) scopeList() []string {
	return strings.FieldsFunc(c.scopes, func(r rune) bool { return r == ' ' || r == ',' })
}

// check enforces which flags go together, naming the rule.
func (c *AuthConfig) check() error {
	if c.hs256 != "" {
		if n := len(c.hs256); n < bearer.MinHS256SecretBytes {
			// Never the secret itself, only its length.
			return base.FlagErr("auth-hs256-secret", "the secret is %d bytes; an HS256 secret must be at least %d bytes (256 bits) of random data", n, bearer.MinHS256SecretBytes)
		}
		if c.jwks != "" {
			return base.FlagErr("auth-jwks", "excludes --auth-hs256-secret (production keys or the development secret, not both)")
		}
		return nil
	}
	if !c.Enabled() {
		return nil
	}
	switch {
	case c.issuer == "":
		return base.FlagErr("auth-issuer", "is required with --auth-jwks, --auth-audience, --auth-scopes or --auth-require-typ (the exact iss of accepted tokens)")
	case c.audience == "":
		return base.FlagErr("auth-audience", "is required with --auth-jwks or --auth-issuer (this server's resource URI, e.g. https://mcp.example.com/mcp)")
	}
	return nil
}

// Verifier builds the bearer-token verifier, or nil when auth is off. With
// a JWKS URL or discovery it fetches the keys now.
func (c *AuthConfig) Verifier(ctx context.Context, log *slog.Logger) (*bearer.Verifier, error) {
	if !c.Enabled() {
		return nil, nil
	}
	opts := &bearer.Options{Issuer: c.issuer, Audience: c.audience, JWKS: c.jwks, Scopes: c.scopeList(), RequireTyp: c.typ, Logger: log}
	if c.hs256 != "" {
		opts.HS256Secret = []byte(c.hs256)
	}
	v, err := bearer.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--auth-*: %w", err)
	}
	mode := "jwks " + c.jwks
	switch {
	case c.hs256 != "":
		mode = "hs256 (development)"
	case c.jwks == "":
		mode = "jwks discovered from " + c.issuer
	}
	log.Info("mrtr auth", "mode", mode, "issuer", v.Issuer(), "audience", v.Audience(), "scopes", v.Scopes(), "require_typ", v.RequireTyp(), "metadata", v.MetadataURL())
	return v, nil
}

// protect puts h behind v (when set) and serves v's RFC 9728 metadata on
// mux through wrap (the loopback Host check).
func protect(v *bearer.Verifier, h http.Handler, mux *http.ServeMux, wrap func(http.Handler) http.Handler) http.Handler {
	if v == nil {
		return h
	}
	for _, p := range v.MetadataPaths() {
		mux.Handle(p, wrap(v.MetadataHandler()))
	}
	return gosdk.RequireBearer(v, h)
}
