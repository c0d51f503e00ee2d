package proxy

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// allowedMethods is the Allow header of a 405: the methods the proxy
// handles. POST carries every MCP message; GET, DELETE, HEAD and OPTIONS
// are passed through without a body (2025-11-25 sessions' GET stream and
// DELETE, and what HTTP clients and browsers send on their own).
const allowedMethods = "GET, HEAD, POST, DELETE, OPTIONS"

// setForwarded is the one rule for forwarding headers, on every path to
// the upstream: whatever the client sent as Forwarded, X-Forwarded-* or
// X-Real-Ip is dropped (an upstream trusting them would trust the client),
// and the proxy sets X-Forwarded-For, X-Forwarded-Host and
// X-Forwarded-Proto itself from the connection, as
// httputil.ProxyRequest.SetXForwarded does.
func setForwarded(out http.Header, in *http.Request) {
	for k := range out {
		if forwardedField(http.CanonicalHeaderKey(k)) {
			delete(out, k)
		}
	}
	if ip, ok := forwardedFor(in); ok {
		out.Set("X-Forwarded-For", ip)
	}
	out.Set("X-Forwarded-Host", in.Host)
	out.Set("X-Forwarded-Proto", forwardedProto(in))
}

// forwardedField reports whether ck, a canonical header name, is one of
// the forwarding headers only the proxy sets.
func forwardedField(ck string) bool {
	return ck == "Forwarded" || ck == "X-Real-Ip" || strings.HasPrefix(ck, "X-Forwarded-")
}

// forwardedFor is the client's address for X-Forwarded-For.
func forwardedFor(in *http.Request) (string, bool) {
	ip, _, err := net.SplitHostPort(in.RemoteAddr)
	return ip, err == nil
}

// forwardedProto is the scheme the client used, for X-Forwarded-Proto.
func forwardedProto(in *http.Request) string {
	if in.TLS == nil {
		return "http"
	}
	return "https"
}

// headerMismatch reports the first MCP request header that is present and
// disagrees with the body of req, whatever its method:
//
//   - Mcp-Method must be the body's method;
//   - Mcp-Name must be what headerName reads from the body; on a body
//     without that member no value matches;
//   - MCP-Protocol-Version must equal the body's _meta protocol version
//     when the body has one (a 2025-11-25 body has none; a pausable call
//     without one is bound to the header's version).
//
// A header sent twice never matches. Absent headers are not judged
// (older clients send none).
func headerMismatch(hd http.Header, req *rpcRequest) (string, bool) {
	if v, ok := headerOf(hd, "Mcp-Method"); ok && v != req.method {
		return "Mcp-Method", true
	}
	if v, ok := headerOf(hd, "Mcp-Name"); ok {
		name, has := req.headerName()
		if !has || v != name {
			return "Mcp-Name", true
		}
	}
	if v, ok := headerOf(hd, "Mcp-Protocol-Version"); ok {
		meta, _ := req.param("_meta")
		raw, _ := mcpwire.Member(meta, mcpwire.MetaProtocolVersion)
		if version, has := mcpwire.StringValue(raw); has && v != version {
			return "Mcp-Protocol-Version", true
		}
	}
	return "", false
}

// headerOf returns the decoded value of header name, ok when it is
// present. A header sent more than once yields a value no body holds.
func headerOf(hd http.Header, name string) (string, bool) {
	switch v := hd.Values(name); len(v) {
	case 0:
		return "", false
	case 1:
		return headerValue(v[0]), true
	default:
		return "\x00", true
	}
}

// headerName is the value an Mcp-Name header may carry for req: the
// spec's (params.uri of resources/read, params.name of tools/call and
// prompts/get, params.taskId of the tasks extension's methods) or, on any
// other method, params.name or else params.uri, as a client mirroring
// them would send; ok is false when the body has none of them.
func (r *rpcRequest) headerName() (string, bool) {
	var keys []string
	switch {
	case r.method == mcpwire.MethodReadResource:
		keys = []string{"uri"}
	case mcpwire.Pausable(r.method):
		keys = []string{"name"}
	case strings.HasPrefix(r.method, "tasks/"):
		keys = []string{"taskId"}
	default:
		keys = []string{"name", "uri"}
	}
	for _, k := range keys {
		if raw, ok := r.param(k); ok {
			return mcpwire.StringValue(raw)
		}
	}
	return "", false
}

// param returns the raw member key of req's params: from the params
// parseRequest split (a pausable call's), or else read from the message.
func (r *rpcRequest) param(key string) (json.RawMessage, bool) {
	if r.params != nil {
		v, ok := r.params[key]
		return v, ok
	}
	return mcpwire.Member(r.msg["params"], key)
}

// headerValue decodes the spec's sentinel form of a header value that is
// not header-safe ASCII, =?base64?<standard base64 of UTF-8>?=; any other
// value is itself. A sentinel that does not decode yields a value no body
// holds ("\x00"), so it never matches.
func headerValue(v string) string {
	const prefix, suffix = "=?base64?", "?="
	if len(v) < len(prefix)+len(suffix) || !strings.HasPrefix(v, prefix) || !strings.HasSuffix(v, suffix) {
		return v
	}
	b, err := base64.StdEncoding.DecodeString(v[len(prefix) : len(v)-len(suffix)])
	if err != nil {
		return "\x00"
	}
	return string(b)
}

// logValue caps a client-chosen string (a method name, up to the body
// limit) for a log line.
func logValue(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

// outHeader is the header of a request to the upstream: the client's,
// without hop-by-hop fields, Host, Content-Length, Accept-Encoding (the
// transport negotiates its own, so the proxy reads plain bytes) and, unless
// configured, Authorization, and with the proxy's own forwarding headers
// (setForwarded's rule), as on the pass-through path. It is built in one
// pass, every value in one array, instead of a clone and its deletions.
func (h *Handler) outHeader(r *http.Request) http.Header {
	in := r.Header
	var named []string // fields the Connection header names
	for _, f := range in["Connection"] {
		for k := range strings.SplitSeq(f, ",") {
			named = append(named, http.CanonicalHeaderKey(strings.TrimSpace(k)))
		}
	}
	drop := func(k string) bool {
		switch k {
		case "Content-Length", "Accept-Encoding", "Content-Type":
			return true
		case "Authorization":
			return !h.fwdAuth
		}
		return slices.Contains(hopHeaders, k) || forwardedField(http.CanonicalHeaderKey(k)) || slices.Contains(named, k)
	}
	ip, hasIP := forwardedFor(r)
	nk, nv := 4, 4 // the forwarding headers and Content-Type
	for k, vs := range in {
		if !drop(k) {
			nk++
			nv += len(vs)
		}
	}
	out := make(http.Header, nk)
	sv := make([]string, 0, nv)
	put := func(k string, vs ...string) {
		n := len(sv)
		sv = append(sv, vs...)
		out[k] = sv[n:len(sv):len(sv)]
	}
	for k, vs := range in {
		if !drop(k) && len(vs) > 0 {
			put(k, vs...)
		}
	}
	if hasIP {
		put("X-Forwarded-For", ip)
	}
	put("X-Forwarded-Host", r.Host)
	put("X-Forwarded-Proto", forwardedProto(r))
	put("Content-Type", "application/json")
	return out
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host"}

// copyHeader copies an upstream response's header, except hop-by-hop
// fields and Content-Length (the proxy may rewrite the body), then sets
// the fields of set (canonical name, value, ...) in place of the
// upstream's; every value it adds is in one array.
func copyHeader(dst, src http.Header, set ...string) {
	var named []string // fields the Connection header names
	for _, f := range src["Connection"] {
		for k := range strings.SplitSeq(f, ",") {
			named = append(named, http.CanonicalHeaderKey(strings.TrimSpace(k)))
		}
	}
	skip := func(k string) bool {
		if k == "Content-Length" || slices.Contains(hopHeaders, k) || slices.Contains(named, k) {
			return true
		}
		for i := 0; i < len(set); i += 2 {
			if set[i] == k {
				return true
			}
		}
		return false
	}
	nv := len(set) / 2
	for k, vs := range src {
		if !skip(k) {
			nv += len(vs)
		}
	}
	sv := make([]string, 0, nv)
	for k, vs := range src {
		if !skip(k) {
			n := len(sv)
			sv = append(sv, vs...)
			dst[k] = sv[n:len(sv):len(sv)]
		}
	}
	for i := 0; i+1 < len(set); i += 2 {
		n := len(sv)
		sv = append(sv, set[i+1])
		dst[set[i]] = sv[n:len(sv):len(sv)]
	}
}
