// Package bearer makes an MCP server an OAuth 2.1 resource server: it
// verifies the bearer tokens an authorization server issued for it and
// turns each into the caller mrtr binds a sealed requestState to, the
// token's issuer and subject (reqstate.Principal).
//
//	v, err := bearer.New(ctx, &bearer.Options{
//		Issuer:   "https://id.example.com",        // exact iss
//		Audience: "https://mcp.example.com/mcp",   // this server (RFC 8707)
//		JWKS:     "https://id.example.com/jwks",   // or a file, or "" for discovery
//		Scopes:   []string{"mcp:tools"},           // optional, on every call
//	})
//	defer v.Close()
//	mux.Handle("/mcp", v.Handler(mcpHandler))      // 401/403 per RFC 6750
//	for _, p := range v.MetadataPaths() {
//		mux.Handle(p, v.MetadataHandler())          // RFC 9728
//	}
//
// go-sdk servers use gosdk.RequireBearer (or gosdk.TokenVerifier with
// go-sdk's auth.RequireBearerToken), which hand the same token to go-sdk as
// a TokenInfo whose UserID is the subject and Extra["iss"] the issuer.
//
// The package is called bearer, not auth, so that it can sit next to
// go-sdk's auth package in one file without renaming either.
//
// # What a token must be
//
// A JWT (RFC 7519; RFC 9068 access tokens are JWTs) signed with RS256,
// RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA (Ed25519)
// by a key of the issuer's JWKS, named by its kid (a token without kid is
// accepted only when the set holds one key). The algorithm is the key's:
// an RSA key verifies RS256 unless its JWK says otherwise, a P-256 key
// ES256, an Ed25519 key EdDSA; a token whose header names anything else
// is refused, so `alg: none`, an HS256 token keyed with a public key and
// every other algorithm confusion fail before any signature is checked.
// Symmetric keys in a JWKS are ignored.
//
// Then: exp is required and, like nbf and iat, checked with Leeway
// (default 30 s); iss must equal Options.Issuer exactly; aud must contain
// Options.Audience; sub must be present (a verified token without a
// subject is refused, never taken as anonymous); and every scope in
// Options.Scopes must be granted (the space-separated "scope" claim, or an
// "scp" array), each matched whole (mcp:tools is not granted by
// mcp:tools-readonly). A token with a crit header is refused whatever its
// algorithm: no extension is understood. With Options.RequireTyp the
// header's typ must be at+jwt or application/at+jwt, in any case (RFC 9068
// §4), so an ID token of the same issuer is no access token; off by
// default, since some issuers omit typ. A token longer than
// Options.MaxTokenBytes (16 KiB) is refused before it is decoded.
//
// Every failure is the one error ErrInvalidToken, whose message carries a
// fixed reason word for logs; no error or log line ever holds a token.
//
// # Keys
//
// Options.JWKS is an https URL (http only to a loopback host), a file, or
// empty: then the issuer's RFC 8414 / OpenID Connect discovery documents
// are read, in the order the MCP authorization spec gives, for jwks_uri,
// and their issuer must equal Options.Issuer. Options.Issuer may also be
// the URL of such a document itself.
//
// New loads the keys before it returns. A URL is fetched again every
// RefreshInterval (15 min) in the background; a file is checked every 5 s
// and read again when its modification time or size changed. A token
// signed with an unknown kid makes the Verifier fetch the keys at once (a
// rotation is picked up on first use), but at most one fetch starts per
// RefetchInterval (30 s) and concurrent callers share it: a flood of
// tokens with random kids costs the issuer one request per interval. A
// fetch that fails (endpoint down, garbage, a half-written file, a set
// without one usable signing key) keeps the last good key set.
//
// # Development
//
// Options.HS256Secret (at least 32 bytes) replaces the JWKS: tokens are
// HS256 under that secret and nothing else; Issuer and Audience are then
// optional. Do not use it in production: whoever verifies can also mint.
package bearer
