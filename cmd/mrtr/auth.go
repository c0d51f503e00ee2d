package main

import (
	"context"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// authenticate wraps h in the configured bearer-token check, if any.
// Without --auth-* flags every caller is anonymous.
func (c *commonConfig) authenticate(h http.Handler) http.Handler {
	if c.authSecret != "" {
		return requireJWT(c.authSecret, c.authIssuer, h)
	}
	return h
}

// requireJWT demands a bearer JWT signed with HS256 under secret, with a
// subject and an unexpired exp (and, when issuer is set, that iss). The
// caller's principal is the token's iss and sub. Failures are 401 with a
// WWW-Authenticate header and a generic body: the reason is not echoed.
func requireJWT(secret, issuer string, next http.Handler) http.Handler {
	key := []byte(secret)
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30 * time.Second),
	}
	if issuer != "" {
		opts = append(opts, jwt.WithIssuer(issuer))
	}
	parser := jwt.NewParser(opts...)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		var claims jwt.RegisteredClaims
		if _, err := parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return key, nil }); err != nil {
			return nil, auth.ErrInvalidToken
		}
		if claims.Subject == "" || claims.ExpiresAt == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{
			UserID:     claims.Subject,
			Expiration: claims.ExpiresAt.Time,
			Extra:      map[string]any{"iss": claims.Issuer},
		}, nil
	}
	inner := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(&challenge{ResponseWriter: w, hadToken: r.Header.Get("Authorization") != ""}, r)
	})
}

// challenge adds the WWW-Authenticate header go-sdk leaves out when it
// has no resource metadata to point to.
type challenge struct {
	http.ResponseWriter
	hadToken bool
}

func (c *challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		v := `Bearer realm="mrtr"`
		if c.hadToken {
			v += `, error="invalid_token"`
		}
		c.Header().Set("WWW-Authenticate", v)
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (flushing event streams).
func (c *challenge) Unwrap() http.ResponseWriter { return c.ResponseWriter }
