package proxy

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Defaults of Options.
const (
	// DefaultMaxBodyBytes caps a client's POST body.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxHeldBytes caps the one message the proxy holds to rewrite:
	// the final response of a pausable call (and any single SSE event of
	// such a call's stream).
	DefaultMaxHeldBytes = 4 << 20
	// DefaultMaxUpstreamState caps the upstream's own requestState, as the
	// JSON string it sends (quotes and escapes included), that a sealed
	// token can carry. With the codec's default 64 KiB token cap, 16 KiB
	// of state always fits, whatever its escaping.
	DefaultMaxUpstreamState = 16 << 10
	// DefaultUpstreamTimeout bounds one request-response exchange with the
	// upstream. Long-lived streams (GET, subscriptions/listen) are not
	// bounded.
	DefaultUpstreamTimeout = 5 * time.Minute
	// DefaultDialTimeout bounds connecting to the upstream.
	DefaultDialTimeout = 10 * time.Second
)

// Options configures a Handler. Upstream and Guard are required; every
// other zero value is a sensible default.
type Options struct {
	// Upstream is the URL of the upstream's Streamable HTTP endpoint,
	// e.g. http://127.0.0.1:3000/mcp. Every request goes to exactly this
	// URL (the client's query string is kept when it has none).
	Upstream string
	// Guard seals the upstream's pauses and checks every resume. Its
	// policy (TTL, rounds, server id, single-use store) is the proxy's.
	Guard *mrtr.Guard
	// Transport reaches the upstream. Nil means a transport like
	// http.DefaultTransport's whose dials are bounded by DialTimeout,
	// keeping up to 256 idle connections for 90 s; with UpstreamTransport
	// lean (the default where supported), to a plain-HTTP upstream reached without an HTTP proxy
	// (HTTP_PROXY, NO_PROXY), it sends every POST of up to 256 KiB over
	// HTTP/1.1 on the handler's own goroutine, which costs the proxy less
	// CPU than an *http.Transport's two goroutines per connection.
	Transport http.RoundTripper
	// UpstreamTransport chooses the transport New builds when Transport
	// is nil: TransportStd (an *http.Transport for every request) or
	// TransportLean (the proxy's own HTTP/1.1 transport for the POSTs it
	// can send, an *http.Transport for the rest; only where
	// LeanTransportSupported, New refuses it elsewhere). The zero value,
	// TransportAuto, is lean where supported and std elsewhere. It is
	// ignored when Transport is set.
	UpstreamTransport TransportKind
	// DialTimeout bounds connecting to the upstream when Transport is nil.
	// Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// UpstreamTimeout bounds each request-response exchange with the
	// upstream, from sending the request to its final message. GET streams
	// and subscriptions/listen are never bounded. Zero means
	// DefaultUpstreamTimeout; negative means none.
	UpstreamTimeout time.Duration
	// MaxBodyBytes caps a client's POST body (413 beyond). Zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxHeldBytes caps the final message of a pausable call, the one
	// message the proxy holds (it must see all of it to seal its
	// requestState); a larger one is answered with a -32603 error.
	// Notifications before it are streamed, not held. Zero means
	// DefaultMaxHeldBytes.
	MaxHeldBytes int64
	// MaxUpstreamState caps the upstream's own requestState (its JSON
	// string as sent) carried inside the sealed token; a larger one is
	// answered with a -32603 error, never truncated. Zero means
	// DefaultMaxUpstreamState.
	MaxUpstreamState int
	// Principal returns the authenticated caller of a request, from
	// credentials an outer middleware verified. Nil means every caller is
	// anonymous. An error refuses the request with 401.
	Principal func(*http.Request) (reqstate.Principal, error)
	// ForwardAuthorization passes the client's Authorization header to the
	// upstream. The default drops it: the MCP authorization guidance
	// forbids passing a token issued for the proxy through to another
	// resource ("token passthrough"). Set it only when the upstream is the
	// token's audience.
	ForwardAuthorization bool
	// AllowedHosts are extra Host (and Origin host) values accepted when
	// the proxy listens on a loopback address. Loopback names (localhost,
	// *.localhost, 127.0.0.0/8, ::1) are always accepted there.
	AllowedHosts []string
	// AnyHost turns off the DNS-rebinding check. The check applies only to
	// requests that arrive on a loopback address; leave it on.
	AnyHost bool
	// Logger receives one line per upstream failure and per refused
	// message, never a token (the guard logs fingerprints). Nil means no
	// logging.
	Logger *slog.Logger
	// Peers, when set, forwards a resume whose call another replica holds
	// to that replica (see Peers). Nil serves every resume here.
	Peers *Peers
	// TaskRing returns the key ring that seals task ids (see the package
	// documentation, "Tasks"); it is called on every use, so a ring that
	// changes takes effect at once. Nil means the ring of the Guard's
	// codec when it is a *reqstate.AESGCM, which replicas sharing that
	// ring share: any of them opens an id another sealed. With neither,
	// a CreateTaskResult is answered with -32603 and no task request
	// reaches the upstream.
	TaskRing func() *reqstate.KeyRing
	// TaskObserver, when set, hears every tasks/* request the proxy
	// refuses itself (task.ReasonUnknownTask for an id that does not open
	// for the caller, task.ReasonMissingExtension for one that does not
	// declare the extension), for metrics, traces and the audit trail, as
	// a task.Manager reports its own refusals. What the upstream does with
	// a task is the upstream's to report. Nil means none.
	TaskObserver task.Observer
}

// TransportKind names the transport New builds to the upstream
// (Options.UpstreamTransport).
type TransportKind string

// The Options.UpstreamTransport values.
const (
	// TransportAuto is TransportLean where LeanTransportSupported, and
	// TransportStd elsewhere.
	TransportAuto TransportKind = ""
	// TransportStd sends every request over an *http.Transport.
	TransportStd TransportKind = "std"
	// TransportLean sends the POSTs of up to 256 KiB to a plain-HTTP
	// upstream reached without an HTTP proxy over the proxy's own
	// HTTP/1.1 transport, on the handler's goroutine, and the rest over
	// an *http.Transport. It runs only where LeanTransportSupported: it
	// must peek at an idle connection's socket to tell that the upstream
	// sent nothing on it that would become the next caller's response.
	TransportLean TransportKind = "lean"
)

// leanTransport reports whether New builds the lean transport for kind
// (and an upstream it can serve), on a platform that supports it or not.
func leanTransport(kind TransportKind, supported bool) (bool, error) {
	switch kind {
	case TransportAuto:
		return supported, nil
	case TransportStd:
		return false, nil
	case TransportLean:
		if !supported {
			return false, errors.New("proxy: the lean upstream transport needs a non-blocking socket peek, which this platform lacks: use the std transport")
		}
		return true, nil
	}
	return false, fmt.Errorf("proxy: unknown upstream transport %q (want std or lean)", string(kind))
}

// Handler is the sealing proxy: an http.Handler in front of one upstream
// MCP server. It is safe for concurrent use.
type Handler struct {
	up        *url.URL
	guard     *mrtr.Guard
	tr        http.RoundTripper // redirects are never followed: a 3xx goes to the client as is
	rp        *httputil.ReverseProxy
	timeout   time.Duration
	maxBody   int64
	maxHeld   int64
	maxState  int
	principal func(*http.Request) (reqstate.Principal, error)
	fwdAuth   bool
	hosts     []string
	anyHost   bool
	log       *slog.Logger
	peers     *peers // nil: every resume is served here
	// flushDelay bounds how long a relayed stream's first bytes wait to be
	// coalesced (flushDelay in sse.go); tests set it.
	flushDelay time.Duration
	// slowStore: the commit of the guard's single-use store waits on I/O
	// (Redis with replica acknowledgments), so it is made off the
	// response's path.
	slowStore bool
	// stdTransport: the upstream transport is an *http.Transport or the
	// proxy's own h1Transport, which report writing a request's headers
	// (httptrace), so a pausable call's body can go as a *bytes.Reader
	// (see forward).
	stdTransport bool
	// watched: the guard has an Observer or an Auditor, which hear the
	// trace context, clientInfo and request id of each call, and how it
	// was answered (reported only then: reading it costs a scan).
	watched bool
	// ids makes the JSON-RPC ids of the requests sent upstream (ids.go);
	// live maps the ones in flight for notifications/cancelled.
	ids  *idSource
	live inflight
	// tasks seals and opens task ids (taskid.go); taskObs hears the
	// task requests refused here (Options.TaskObserver).
	tasks   *taskSealer
	taskObs task.Observer
}

// New returns a proxy to opts.Upstream. It returns an error for an
// upstream URL that is not absolute http or https, and for an
// UpstreamTransport it cannot build here; a nil Guard panics.
func New(opts Options) (*Handler, error) {
	if opts.Guard == nil {
		panic("proxy: New needs a Guard")
	}
	u, err := url.Parse(opts.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("proxy: upstream %q is not an http(s) URL", opts.Upstream)
	}
	pol := opts.Guard.Policy()
	h := &Handler{
		watched:   pol.Observer != nil || pol.Auditor != nil,
		up:        u,
		guard:     opts.Guard,
		timeout:   opts.UpstreamTimeout,
		maxBody:   opts.MaxBodyBytes,
		maxHeld:   opts.MaxHeldBytes,
		maxState:  opts.MaxUpstreamState,
		principal: opts.Principal,
		fwdAuth:   opts.ForwardAuthorization,
		anyHost:   opts.AnyHost,
		log:       opts.Logger,

		flushDelay: flushDelay,
		ids:        newIDSource(),
		taskObs:    opts.TaskObserver,
	}
	if opts.Peers != nil {
		h.peers = newPeers(opts.Peers)
	}
	h.tasks = &taskSealer{ring: opts.TaskRing, now: pol.Now, server: pol.ServerID, upstream: taskUpstream(u)}
	if h.tasks.ring == nil {
		if c, ok := opts.Guard.Codec().(interface{ KeyRing() *reqstate.KeyRing }); ok {
			h.tasks.ring = c.KeyRing
		}
	}
	for _, a := range opts.AllowedHosts {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			h.hosts = append(h.hosts, a)
		}
	}
	if h.timeout == 0 {
		h.timeout = DefaultUpstreamTimeout
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.maxHeld <= 0 {
		h.maxHeld = DefaultMaxHeldBytes
	}
	if h.maxState <= 0 {
		h.maxState = DefaultMaxUpstreamState
	}
	if h.principal == nil {
		h.principal = func(*http.Request) (reqstate.Principal, error) { return reqstate.Principal{}, nil }
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	tr := opts.Transport
	lean, err := leanTransport(opts.UpstreamTransport, LeanTransportSupported) // h1_peek.go, h1_nopeek.go
	if err != nil && tr == nil {
		return nil, err
	}
	if tr == nil {
		dial := opts.DialTimeout
		if dial <= 0 {
			dial = DefaultDialTimeout
		}
		d := (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = d
		t.MaxIdleConnsPerHost = 256
		tr = t
		if lean && directHTTP(u, t.Proxy) {
			tr = newH1Transport(u.Host, t, d, t.MaxIdleConnsPerHost) // h1.go
		}
	}
	switch tr.(type) {
	case *http.Transport, *h1Transport:
		h.stdTransport = true
	}
	tr = &watchedTransport{next: tr, log: h.log, url: shownURL(u)} // upstream.go; shown.go
	h.tr = tr
	if st := pol.Store; st != nil {
		_, fast := st.(replay.NonBlocking)
		lc, ok := st.(replay.LocalCommit)
		h.slowStore = !fast && !(ok && lc.LocalCommit())
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		ModifyResponse: h.checkPassed, // ids.go
		Transport:      tr,
		FlushInterval:  -1, // relay every frame as it arrives
		ErrorLog:       log.New(&slogWriter{h.log}, "", 0),
		ErrorHandler:   h.passThroughFailed,
	}
	return h, nil
}

type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	w.l.Warn("proxy: " + strings.TrimSpace(string(p)))
	return len(p), nil
}
