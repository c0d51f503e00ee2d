package proxy

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// hostOK protects a proxy listening on loopback against DNS rebinding: a
// page on evil.example whose name a rebinding DNS points at 127.0.0.1
// reaches the proxy with Host: evil.example. The upstream can no longer
// tell (it sees the proxy's request), so the check is the proxy's job.
// The Host must name a loopback host (or an allowed one), and a browser's
// Origin, when present, must too. Requests arriving on other addresses
// are not checked: the network in front of the proxy decides there.
func (h *Handler) hostOK(r *http.Request) bool {
	if h.anyHost {
		return true
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if tcp, ok := la.(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		return true
	}
	if !h.hostAllowed(r.Host) {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !h.hostAllowed(u.Host) {
			return false
		}
	}
	return true
}

func (h *Handler) hostAllowed(hostport string) bool {
	hp := strings.ToLower(hostport)
	host := hp
	if hh, _, err := net.SplitHostPort(hp); err == nil {
		host = hh
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range h.hosts {
		if a == host || a == hp {
			return true
		}
	}
	return false
}

func return403(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, nil, mcpwire.CodeInvalidRequest, "forbidden: invalid Host or Origin header", nil)
}
