package gosdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mrtr-go/mrtr/bearer"
)

// TokenVerifier adapts a bearer.Verifier to go-sdk's auth.TokenVerifier, for
// servers that use go-sdk's auth.RequireBearerToken. The TokenInfo it returns
// has UserID = the token's sub and Extra["iss"] = its iss, which is what the
// adapter's default Principal reads, so sealed states are bound to issuer
// and subject.
//
// go-sdk's middleware answers every verifier error with 401 and has no
// insufficient_scope of its own from a verifier; to get 403 for a missing
// scope, list the scopes in auth.RequireBearerTokenOptions.Scopes and leave
// bearer.Options.Scopes empty. If bearer.Options.Scopes is set, a token
// lacking one is refused as invalid (401): closed, if less precise.
// RequireBearer gives the precise answers with either.
func TokenVerifier(v *bearer.Verifier) auth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		t, err := v.Verify(ctx, token)
		if err != nil {
			if errors.Is(err, bearer.ErrInsufficientScope) {
				return nil, fmt.Errorf("%w: insufficient scope", auth.ErrInvalidToken)
			}
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
		}
		return tokenInfo(t), nil
	}
}

func tokenInfo(t *bearer.Token) *auth.TokenInfo {
	return &auth.TokenInfo{
		UserID:     t.Principal.Subject,
		Scopes:     t.Scopes,
		Expiration: t.Expiry,
		Extra:      map[string]any{"iss": t.Principal.Issuer},
	}
}

// RequireBearer protects a go-sdk Streamable HTTP handler (NewHTTPHandler's,
// or go-sdk's own) with v: v.Handler's RFC 6750 / RFC 9728 refusals (401
// with resource_metadata and error=invalid_token, 403 insufficient_scope),
// then the verified token handed to go-sdk as its auth.TokenInfo, so the
// adapter binds every sealed state to the token's issuer and subject. The
// token is verified once. Serve v.MetadataHandler at v.MetadataPaths()
// beside it.
func RequireBearer(v *bearer.Verifier, next http.Handler) http.Handler {
	verified := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		t, ok := bearer.FromContext(r.Context())
		if !ok {
			return nil, auth.ErrInvalidToken // unreachable: v.Handler runs first
		}
		return tokenInfo(t), nil
	}
	inner := auth.RequireBearerToken(verified, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: v.MetadataURL(),
		// v has checked exp with its leeway (and its clock) already.
		ClockSkew: v.Leeway(),
	})(next)
	return v.Handler(inner)
}
