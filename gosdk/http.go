package gosdk

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
)

// Defaults of HTTPOptions.
const (
	// DefaultSessionTimeout closes a 2025-11-25 session idle this long.
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxSessions is the most live 2025-11-25 sessions at once.
	DefaultMaxSessions = 1000
)

// HTTPOptions configures NewHTTPHandler. The zero value is ready to use.
type HTTPOptions struct {
	// MaxRequestBodyBytes caps a request body (413 beyond). Zero means
	// go-sdk's default (4 MiB).
	MaxRequestBodyBytes int64
	// JSONResponse answers 2026-07-28 requests with application/json
	// instead of an event stream when the handler sends no notification.
	JSONResponse bool
	// Logger is passed to go-sdk's transports. Nil means theirs.
	Logger *slog.Logger
	// EventStore lets legacy (2025-11-25) clients resume an event stream
	// that broke mid-call. Nil means go-sdk's bounded in-memory store; the
	// 2026-07-28 wire has no resumability and never uses it.
	EventStore mcp.EventStore
	// SessionTimeout closes a 2025-11-25 session (Mcp-Session-Id) that
	// has received no request for this long, freeing its memory and
	// goroutines; the client must initialize again. Zero means
	// DefaultSessionTimeout; a negative value means sessions never expire,
	// which lets anyone who can reach the endpoint exhaust memory.
	SessionTimeout time.Duration
	// MaxSessions caps the live 2025-11-25 sessions. A request that would
	// open one more (an initialize without Mcp-Session-Id) gets HTTP 503
	// while existing sessions keep working. Zero means
	// DefaultMaxSessions; a negative value means no cap. 2026-07-28
	// requests open no session and are never refused by it.
	MaxSessions int
	// AllowedHosts are Host header values (host or host:port, any case)
	// accepted on a loopback connection besides loopback names. A request
	// arriving on a loopback address must otherwise name a loopback host,
	// as go-sdk checks against DNS rebinding (the handler makes that check
	// itself, with this list; go-sdk's own cannot take one). Nil keeps
	// go-sdk's rule exactly. Example: a local reverse proxy that sends
	// Host: mcp.internal.
	AllowedHosts []string
}

// NewHTTPHandler serves s over Streamable HTTP to clients of every
// protocol version on one endpoint: requests whose MCP-Protocol-Version
// header is 2026-07-28 or later go to a stateless handler (no sessions,
// Multi Round-Trip Requests on the wire), all others to a stateful one
// (the 2025-11-25 initialize handshake, where go-sdk's bridge and the
// adapter fulfil input requests through the session). Stateful sessions
// expire when idle and are capped (SessionTimeout, MaxSessions).
// Protection against DNS rebinding (Host checks on loopback connections)
// stays on, widened by AllowedHosts.
func NewHTTPHandler(s *mcp.Server, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.SessionTimeout == 0:
		o.SessionTimeout = DefaultSessionTimeout
	case o.SessionTimeout < 0:
		o.SessionTimeout = 0 // go-sdk: never
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	get := func(*http.Request) *mcp.Server { return s }
	// go-sdk's own Host check cannot take an allow list; ours does the
	// same with one.
	modern := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: o.JSONResponse, Logger: o.Logger, MaxRequestBodyBytes: o.MaxRequestBodyBytes,
		DisableLocalhostProtection: true,
	})
	if o.EventStore == nil {
		o.EventStore = mcp.NewMemoryEventStore(nil)
	}
	legacy := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: o.Logger, MaxRequestBodyBytes: o.MaxRequestBodyBytes, EventStore: o.EventStore,
		SessionTimeout: o.SessionTimeout, DisableLocalhostProtection: true,
	})
	capped := &sessionCap{server: s, max: int64(o.MaxSessions), next: legacy, logger: o.Logger}
	allowed := make(map[string]bool, len(o.AllowedHosts))
	for _, h := range o.AllowedHosts {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r, allowed) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= adapt.ModernVersion {
			if r.Method == http.MethodPost {
				var body []byte
				r, body = readBadState(r, o.MaxRequestBodyBytes)
				if body != nil && taskNameMismatch(w, r, body) {
					return
				}
			}
			modern.ServeHTTP(w, r)
			return
		}
		capped.ServeHTTP(w, r)
	})
}

// withBadState reads a 2026-07-28 POST's body for a requestState that
// is neither a string nor null (adapt.StripBadState): go-sdk would answer
// it with a -32020 header mismatch before any handler ran. Such a member
// is removed and the call marked, so the adapter's handler has the guard
// refuse it as every invalid token is. The body is read up to go-sdk's
// limit; a longer one goes on whole, for go-sdk to refuse (413).
func withBadState(r *http.Request, limit int64) *http.Request {
	r, _ = readBadState(r, limit)
	return r
}

// readBadState is withBadState that also returns the body passed on, or
// nil when it was not read whole.
func readBadState(r *http.Request, limit int64) (*http.Request, []byte) {
	if limit <= 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	body, err := readUpTo(r.Body, limit+1, r.ContentLength)
	if err != nil || int64(len(body)) > limit {
		// go-sdk reads what was read and the rest, and answers as it does.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return r, nil
	}
	r.Body.Close()
	out, bad := adapt.StripBadState(body)
	rb := &readBody{}
	rb.Reset(out)
	r.Body = rb
	r.ContentLength = int64(len(out))
	if bad {
		r = r.WithContext(context.WithValue(r.Context(), badStateKey{}, true))
	}
	return r, out
}

// readUpTo reads r to its end or to n bytes, whichever comes first, as
// io.ReadAll(io.LimitReader(r, n)) does, into one buffer sized by size
// (the request's ContentLength; negative when unknown) when that is
// below n and maxPresized: a declared body is read in one allocation
// instead of io.ReadAll's growing ones. A larger one grows as its bytes
// arrive, so a header alone cannot make the server allocate megabytes.
func readUpTo(r io.Reader, n, size int64) ([]byte, error) {
	c := int64(512)
	if size >= 0 && size < n && size < maxPresized {
		c = size + 1 // room to read the end without growing
	}
	b := make([]byte, 0, c)
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := b[len(b):cap(b)]
		if rest := n - int64(len(b)); int64(len(room)) > rest {
			room = room[:rest]
		}
		m, err := r.Read(room)
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// maxPresized is the largest declared body readUpTo allocates for
// before its bytes arrive.
const maxPresized = 64 << 10

// readBody is a request body read whole already: a bytes.Reader with a
// Close, in one allocation.
type readBody struct{ bytes.Reader }

func (*readBody) Close() error { return nil }

type badStateKey struct{}

// badState reports whether withBadState marked the call of ctx.
func badState(ctx context.Context) bool {
	b, _ := ctx.Value(badStateKey{}).(bool)
	return b
}

// hostAllowed is go-sdk's DNS rebinding check with an allow list: a
// request that arrived on a loopback address must name a loopback host or
// an allowed one.
func hostAllowed(r *http.Request, allowed map[string]bool) bool {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if la == nil || !isLoopback(la.String()) || isLoopback(r.Host) {
		return true
	}
	hostport := strings.ToLower(r.Host)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return allowed[hostport] || allowed[host]
}

// isLoopback is go-sdk's test: localhost or a loopback IP, with or
// without a port.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// sessionCap refuses a new 2025-11-25 session while max are live. A
// slot is taken before go-sdk opens the session (so concurrent
// initializes cannot overshoot) and given back when the session closes:
// on DELETE, on SessionTimeout, or at once when no session came of the
// request.
type sessionCap struct {
	server *mcp.Server
	max    int64 // negative: no cap
	live   atomic.Int64
	next   http.Handler
	logger *slog.Logger
}

func (c *sessionCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.max < 0 || r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		c.next.ServeHTTP(w, r)
		return
	}
	if c.live.Add(1) > c.max {
		c.live.Add(-1)
		if c.logger != nil {
			c.logger.Warn("gosdk: refused a new 2025-11-25 session: the cap on live sessions is reached", "max_sessions", c.max)
		}
		w.Header().Set("Retry-After", "60")
		http.Error(w, fmt.Sprintf("Service Unavailable: too many open sessions (at most %d); try again later", c.max), http.StatusServiceUnavailable)
		return
	}
	c.next.ServeHTTP(w, r)
	// go-sdk names a session it keeps in the response header.
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		for ss := range c.server.Sessions() {
			if ss.ID() == id {
				go func() {
					ss.Wait()
					c.live.Add(-1)
				}()
				return
			}
		}
	}
	c.live.Add(-1) // no session, or it closed already
}

// liveSessions is the number of slots held, for tests.
func (c *sessionCap) liveSessions() int64 { return c.live.Load() }
