package bearer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// discoveryURLs lists where an issuer's metadata may live, in the order the
// MCP authorization spec tries them: RFC 8414 OAuth authorization server
// metadata, then OpenID Connect discovery (path-inserted and, for an
// issuer with a path, appended).
func discoveryURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("issuer %q is not an http(s) URL, so it cannot be discovered", issuer)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("issuer %q has a query or fragment (RFC 8414 §2 forbids both)", issuer)
	}
	base := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{
			base + "/.well-known/oauth-authorization-server",
			base + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		base + "/.well-known/oauth-authorization-server" + path,
		base + "/.well-known/openid-configuration" + path,
		base + path + "/.well-known/openid-configuration",
	}, nil
}

// isDiscoveryURL tells whether s names a metadata document itself rather
// than an issuer.
func isDiscoveryURL(s string) bool {
	return strings.Contains(s, "/.well-known/openid-configuration") ||
		strings.Contains(s, "/.well-known/oauth-authorization-server")
}

type serverMetadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// discover finds the issuer's JWKS URL. issuer is either the issuer
// identifier (its well-known documents are tried in turn) or the URL of one
// such document (then the document names the issuer). The document's issuer
// must match exactly (RFC 8414 §3.3, OpenID Connect Discovery §4.3).
func discover(ctx context.Context, client *http.Client, issuer string) (iss, jwksURI string, err error) {
	var candidates []string
	if isDiscoveryURL(issuer) {
		if err := checkFetchURL(issuer); err != nil {
			return "", "", err
		}
		candidates = []string{issuer}
	} else {
		if err := checkFetchURL(issuer); err != nil {
			return "", "", err
		}
		if candidates, err = discoveryURLs(issuer); err != nil {
			return "", "", err
		}
	}
	var errs []error
	for _, c := range candidates {
		body, err := getDocument(ctx, client, c)
		if err != nil {
			errs = append(errs, err)
			var se *statusError
			if errors.As(err, &se) && se.code >= 400 && se.code < 500 {
				continue // not here: try the next well-known place
			}
			break // unreachable or failing: trying more would only hide that
		}
		var m serverMetadata
		if err := json.Unmarshal(body, &m); err != nil {
			return "", "", fmt.Errorf("decode %s: %w", c, err)
		}
		want := issuer
		if len(candidates) == 1 && isDiscoveryURL(issuer) {
			want = m.Issuer
			if err := checkFetchURL(want); err != nil {
				return "", "", fmt.Errorf("%s: issuer: %w", c, err)
			}
		}
		if m.Issuer != want {
			return "", "", fmt.Errorf("%s names issuer %q, not %q", c, m.Issuer, want)
		}
		if m.JWKSURI == "" {
			return "", "", fmt.Errorf("%s has no jwks_uri", c)
		}
		if err := checkFetchURL(m.JWKSURI); err != nil {
			return "", "", fmt.Errorf("%s: jwks_uri: %w", c, err)
		}
		return m.Issuer, m.JWKSURI, nil
	}
	return "", "", fmt.Errorf("discover issuer %s: %w", issuer, errors.Join(errs...))
}

// checkFetchURL admits https URLs, and http only to a loopback host (a
// development issuer on this machine): keys fetched in clear over a network
// could be anyone's.
func checkFetchURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q: http is allowed only to a loopback host; use https", s)
	}
	return fmt.Errorf("%q is neither https nor http", s)
}

// loopbackHost reports whether a fetch to h stays on this machine: a
// loopback address, or localhost (which /etc/hosts names). A name under
// .localhost is not one: Go's resolver asks the network's DNS for it, which
// may answer with any address.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
