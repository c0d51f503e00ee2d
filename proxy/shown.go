package proxy

import "net/url"

// shownURL is how the proxy's logs name its upstream: scheme, host and
// path only. Userinfo, the query and the fragment are left out, whatever
// they hold: url.URL.Redacted masks only a password, and an API key rides
// in a query (?api_key=...) as often.
func shownURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
