package bearer

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// MetadataPath is where RFC 9728 protected resource metadata is served
// at the root of a host.
const MetadataPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is an RFC 9728 protected resource metadata document.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
}

// metadataURL derives the RFC 9728 §3.1 metadata URL of a resource: the
// well-known path inserted between host and path. "" when the resource is
// not an absolute http(s) URL.
func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" || u.User != nil {
		return ""
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	m := u.Scheme + "://" + u.Host + MetadataPath + path
	if u.RawQuery != "" {
		m += "?" + u.RawQuery
	}
	return m
}

// MetadataURL returns the URL of this resource's RFC 9728 metadata, derived
// from the audience (https://mcp.example.com/mcp gives
// https://mcp.example.com/.well-known/oauth-protected-resource/mcp), or ""
// when the audience is not an http(s) URL (then no metadata is advertised).
func (v *Verifier) MetadataURL() string { return v.metadataURL }

// MetadataPaths returns the paths to serve MetadataHandler at: the one in
// MetadataURL and the root MetadataPath. Nil when there is no metadata.
func (v *Verifier) MetadataPaths() []string {
	if v.metadataURL == "" {
		return nil
	}
	u, _ := url.Parse(v.metadataURL)
	if u.Path == MetadataPath {
		return []string{MetadataPath}
	}
	return []string{u.Path, MetadataPath}
}

// Metadata returns this resource's RFC 9728 metadata: the audience as
// resource, the issuer as authorization server, the required scopes, and
// the Authorization header as the one way to send a token.
func (v *Verifier) Metadata() ResourceMetadata {
	m := ResourceMetadata{
		Resource:               v.audience,
		ScopesSupported:        v.Scopes(),
		BearerMethodsSupported: []string{"header"},
	}
	if v.issuer != "" {
		m.AuthorizationServers = []string{v.issuer}
	}
	return m
}

// MetadataHandler serves Metadata as JSON to GET (and CORS preflight),
// readable from any origin: it is public by design (RFC 9728 §3).
func (v *Verifier) MetadataHandler() http.Handler {
	body, _ := json.Marshal(v.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, MCP-Protocol-Version")
		switch r.Method {
		case http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodHead:
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=300")
		w.Write(body)
	})
}

// Handler requires a valid bearer token in the Authorization header on
// every request to next, and puts the verified Token in the request's
// context (FromContext). Refusals follow RFC 6750 §3 and the MCP
// authorization spec:
//
//   - no bearer token: 401, WWW-Authenticate: Bearer
//     resource_metadata="<MetadataURL>"[, scope="<Scopes>"];
//   - a token that does not verify: 401, the same with
//     error="invalid_token";
//   - a malformed Authorization header (two of them, a bearer scheme
//     without a proper token): 400, error="invalid_request";
//   - a valid token lacking a required scope: 403,
//     error="insufficient_scope", scope="<Scopes>".
//
// The response body is a fixed word; the reason (never the token) is
// logged at debug level.
func (v *Verifier) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, status := parseAuthorization(r.Header.Values("Authorization"))
		switch status {
		case noToken:
			v.refuse(w, http.StatusUnauthorized, "")
			return
		case badRequest:
			v.log.Debug("bearer token refused", "reason", "malformed Authorization header")
			v.refuse(w, http.StatusBadRequest, "invalid_request")
			return
		}
		t, err := v.Verify(r.Context(), tok)
		switch {
		case errors.Is(err, ErrInsufficientScope):
			v.log.Debug("bearer token refused", "reason", "insufficient scope", "iss", t.Principal.Issuer, "sub", t.Principal.Subject)
			v.refuse(w, http.StatusForbidden, "insufficient_scope")
			return
		case err != nil:
			v.log.Debug("bearer token refused", "reason", err.Error())
			v.refuse(w, http.StatusUnauthorized, "invalid_token")
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), t)))
	})
}

// Challenge returns the WWW-Authenticate value for a refusal with the
// given RFC 6750 error code ("" when no token was presented).
func (v *Verifier) Challenge(code string) string {
	var params []string
	if code != "" {
		params = append(params, `error="`+code+`"`)
	}
	if v.metadataURL != "" {
		params = append(params, `resource_metadata="`+v.metadataURL+`"`)
	} else {
		params = append(params, `realm="mrtr"`)
	}
	if len(v.scopes) > 0 && code != "invalid_request" {
		params = append(params, `scope="`+strings.Join(v.scopes, " ")+`"`)
	}
	return "Bearer " + strings.Join(params, ", ")
}

func (v *Verifier) refuse(w http.ResponseWriter, status int, code string) {
	w.Header().Set("WWW-Authenticate", v.Challenge(code))
	msg := "unauthorized"
	switch status {
	case http.StatusForbidden:
		msg = "insufficient scope"
	case http.StatusBadRequest:
		msg = "invalid Authorization header"
	}
	http.Error(w, msg, status)
}

type authStatus int

const (
	hasToken authStatus = iota
	noToken
	badRequest
)

// parseAuthorization finds the bearer token in the Authorization header
// values (RFC 6750 §2.1). Another scheme counts as no bearer token.
func parseAuthorization(values []string) (string, authStatus) {
	switch len(values) {
	case 0:
		return "", noToken
	case 1:
	default:
		return "", badRequest
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", noToken
	}
	tok := strings.TrimLeft(rest, " ")
	if !b64token(tok) {
		return "", badRequest
	}
	return tok, hasToken
}

// b64token reports whether s matches RFC 6750's
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
