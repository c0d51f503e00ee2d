package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
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
	}
	if opts.Peers != nil {
		h.peers = newPeers(opts.Peers)
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

// ServeHTTP proxies one request. See the package documentation.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostOK(r) {
		return403(w)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		// GET streams and DELETE of 2025-11-25 sessions, HEAD, CORS
		// preflights: as is, streamed, and without a body, which none of
		// them has a use for and which the proxy would not read.
		if r.ContentLength != 0 {
			writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: a "+r.Method+" request has no body", nil)
			return
		}
		if r = h.withCaller(w, r, nil); r != nil {
			h.rp.ServeHTTP(w, r)
		}
		return
	default:
		// PUT, PATCH and the rest are no MCP request: refused, never
		// forwarded unread.
		w.Header().Set("Allow", allowedMethods)
		writeError(w, http.StatusMethodNotAllowed, nil, mcpwire.CodeInvalidRequest, "method not allowed", nil)
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, h.maxBody), r.ContentLength, h.maxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, mcpwire.CodeInvalidRequest, "request body too large", nil)
			return
		}
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "parse error: unreadable body", nil)
		return
	}
	req, err := parseRequest(body)
	var folded *foldedNameError
	switch {
	case errors.Is(err, mcpwire.ErrDuplicateName):
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: a member name repeats", nil)
		return
	case errors.As(err, &folded):
		writeError(w, http.StatusBadRequest, folded.id, mcpwire.CodeInvalidRequest, "invalid request: a "+folded.Error(), nil)
		return
	case errors.Is(err, errBadRequest) || errors.Is(err, mcpwire.ErrNotObject):
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: one JSON-RPC object expected (no batches)", nil)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, nil, mcpwire.CodeParseError, "parse error", nil)
		return
	}
	if name, mismatch := headerMismatch(r.Header, req); mismatch {
		// A token is bound to the body, and the proxy judges every
		// message by its body; an upstream that routed on a header naming
		// something else would run what the proxy did not check. The
		// spec's answer to a mismatch is -32020 (400).
		h.log.WarnContext(r.Context(), "proxy: a request header disagrees with its body", "header", name, "method", logValue(req.method))
		writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeHeaderMismatch, "header mismatch: "+name+" does not match the request body", nil)
		return
	}
	if mcpwire.Pausable(req.method) {
		if req.id == nil {
			writeError(w, http.StatusBadRequest, nil, mcpwire.CodeInvalidRequest, "invalid request: "+req.method+" must be a request with an id", nil)
			return
		}
		h.pausable(w, r, req)
		return
	}
	principal, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, req.id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return
	}
	out := req.body
	ctx := context.WithValue(r.Context(), idKey{}, req)
	key := cancelKey{who: principal, session: r.Header.Get("Mcp-Session-Id")}
	switch {
	case req.id != nil && req.method != "":
		// A request: sent under the proxy's own id (ids.go), a client's
		// response to a server's request passes as it is.
		x := h.newExchange(req.id, req.method)
		if out, err = requestWithID(req, x.sent); err != nil {
			writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeInvalidRequest, "invalid request", nil)
			return
		}
		req.x = x
		key.id = string(req.id)
		if !h.live.add(key, x.sent) {
			writeError(w, http.StatusOK, req.id, mcpwire.CodeInvalidRequest, msgIDInUse, nil)
			return
		}
		defer h.live.remove(key, x.sent)
		x.trace.GotConn = x.gotConn
		ctx = httptrace.WithClientTrace(ctx, &x.trace)
	case req.method == methodCancelled:
		var ok bool
		if out, ok = h.cancelled(key, req); !ok {
			// No request of this caller's is in flight under that id: there
			// is nothing to cancel, and the notification must not reach a
			// request of another's.
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	if h.timeout > 0 && req.method != methodListen && req.id != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	r2 := r.Clone(bridge.WithCaller(ctx, principal))
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	r2.GetBody = nil
	h.rp.ServeHTTP(w, r2)
}

// readBody is io.ReadAll of a body whose length the client declared (n,
// -1 when unknown), in one allocation when it is within max: the buffer
// starts one byte larger than declared, room for the read that finds the
// end.
func readBody(r io.Reader, n, max int64) ([]byte, error) {
	if n < 0 || n > max {
		n = 511 // io.ReadAll's start
	}
	b := make([]byte, 0, n+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// withCaller returns r with its caller (Options.Principal) in the context,
// for a transport that serves callers separately (the bridge: sessions and
// 2025-11-25 session ids are never shared between callers), or nil after
// answering 401 when the principal cannot be had.
func (h *Handler) withCaller(w http.ResponseWriter, r *http.Request, id json.RawMessage) *http.Request {
	p, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return nil
	}
	return r.WithContext(bridge.WithCaller(r.Context(), p))
}

type idKey struct{}

// rewrite points a passed-through request at the upstream.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL = h.target(pr.In.URL)
	pr.Out.Host = ""
	if req, _ := pr.In.Context().Value(idKey{}).(*rpcRequest); req != nil && req.x != nil {
		// The answer is read to check its id: in plain bytes, which the
		// transport negotiates and decodes itself.
		pr.Out.Header.Del("Accept-Encoding")
	}
	setForwarded(pr.Out.Header, pr.In)
	if !h.fwdAuth {
		pr.Out.Header.Del("Authorization")
	}
}

func (h *Handler) target(in *url.URL) *url.URL {
	u := *h.up
	if u.RawQuery == "" && in != nil {
		u.RawQuery = in.RawQuery
	}
	return &u
}

// passThroughFailed answers a request the upstream did not answer.
func (h *Handler) passThroughFailed(w http.ResponseWriter, r *http.Request, err error) {
	req, _ := r.Context().Value(idKey{}).(*rpcRequest)
	method := r.Method
	if req != nil && req.method != "" {
		method = req.method
	}
	h.log.ErrorContext(r.Context(), "proxy: upstream failed", "method", method, "upstream", shownURL(h.up), "error", err)
	if req == nil || req.id == nil {
		http.Error(w, "upstream unavailable", http.StatusBadGateway)
		return
	}
	writeError(w, http.StatusOK, req.id, mrtr.CodeInternalError, "upstream unavailable", nil)
}

// call is one pausable call on its way through the proxy.
type call struct {
	req    *rpcRequest
	flow   *mrtr.Flow
	target string
	// x is the request as sent upstream, under the proxy's id; refused
	// is set once an answer was not the request's (finishMessage).
	x       *exchange
	refused bool
}

// errUpstreamRPC releases a reservation: the upstream answered a resume
// with a JSON-RPC error.
var errUpstreamRPC = errors.New("proxy: upstream answered with a JSON-RPC error")

// errNoResponse is the cause logged for an event stream that ended before
// the call's response.
var errNoResponse = errors.New("proxy: upstream closed the stream without a response")

// pausable runs one tools/call, prompts/get or resources/read: checks any
// requestState with the guard before anything reaches the upstream,
// forwards the upstream's own state and the asked answers, relays the
// upstream's answer and seals an input_required one.
func (h *Handler) pausable(w http.ResponseWriter, r *http.Request, req *rpcRequest) {
	ctx := r.Context()
	target, ok := req.target()
	if !ok {
		writeError(w, http.StatusOK, req.id, mrtr.CodeInvalidParams, "invalid params: "+req.method+" needs a "+mcpwire.TargetParam(req.method), nil)
		return
	}
	principal, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, req.id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return
	}
	p := req.params
	v, _ := mcpwire.Member(p["_meta"], mcpwire.MetaProtocolVersion)
	version, ok := mcpwire.StringValue(v)
	if !ok {
		version = r.Header.Get("Mcp-Protocol-Version")
	}
	mreq := &mrtr.Request{
		Method:          req.method,
		ProtocolVersion: version,
		Target:          target,
		Principal:       principal,
	}
	if req.method != mcpwire.MethodReadResource {
		mreq.Arguments = p["arguments"]
	}
	if h.watched { // only the Observer and the Auditor read the trace context and clientInfo
		mreq.Meta = traceMeta(p["_meta"])
		mreq.RequestID = string(req.id)
	}
	// The proxy only translates what the body holds; the guard decides.
	if p.Has("requestState") {
		// An empty state is no state, as for the guard: a first call.
		mreq.RequestState, ok = p.String("requestState")
		mreq.BadState = !ok
	}
	// Answers are read only beside a state to check. A call without one
	// is a first call, and its answers are nobody's: every pause through
	// the proxy carries a sealed token (even when the upstream sent no
	// state), so a legitimate resume always has one. upstreamBody drops
	// them, so the upstream never runs a resume the guard did not check.
	if _, present := p["inputResponses"]; present {
		answers, isObj := p.Object("inputResponses")
		mreq.BadResponses = !isObj || len(answers) == 0
		if mreq.RequestState != "" && len(answers) > 0 {
			mreq.InputResponses = make(map[string]any, len(answers))
			for k, v := range answers {
				mreq.InputResponses[k] = v
			}
		}
	}
	if h.peers != nil && mreq.RequestState != "" && h.routed(w, r, req, mreq) { // peers.go
		return
	}
	// Sent under the proxy's own id (ids.go), recorded before the guard
	// runs: a request refused here spends no token.
	x := h.newExchange(req.id, req.method)
	key := cancelKey{who: principal, session: r.Header.Get("Mcp-Session-Id"), id: string(req.id)}
	if !h.live.add(key, x.sent) {
		writeError(w, http.StatusOK, req.id, mcpwire.CodeInvalidRequest, msgIDInUse, nil)
		return
	}
	defer h.live.remove(key, x.sent)
	fl, err := h.guard.Begin(ctx, mreq)
	if err != nil {
		writeGuardError(w, req.id, err)
		return
	}
	c := &call{req: req, flow: fl, target: target, x: x}
	// A transport that serves callers separately (the bridge) learns the
	// caller through the upstream request's context.
	release := h.forward(w, r.WithContext(bridge.WithCaller(ctx, principal)), c)
	if release == nil && fl.Resumed() && h.slowStore {
		// Spending the token: its reservation already holds until the
		// token expires (replay.Store), so the commit only confirms it and
		// need not hold the response back (net/http sends the last bytes
		// when the handler returns). A commit that is lost is a lost
		// commit: the token stays spent. A release, which lets the user
		// send the same requestState again, stays on the response's path.
		go func() { _ = fl.End(context.WithoutCancel(ctx), nil) }() // bounded by the guard's StoreTimeout
		return
	}
	_ = fl.End(ctx, release) // a failed commit or release is logged by the guard
}

// upstreamBody returns the body the upstream receives for a call whose
// params change: on a resume, its own requestState (byte for byte, none if
// it sent none) and only the answers to the keys it asked; otherwise the
// client's params without any requestState or inputResponses member (null
// and empty ones included), so that only a resume the guard checked ever
// reaches the upstream as one. The two members are spliced into the
// client's bytes (every other member as the client wrote it; the names are
// unique, parseRequest); the message is encoded again from its parsed
// members only when it cannot be (an envelope of more than 16 members).
func upstreamBody(c *call) ([]byte, error) {
	state, answers, err := resumeMembers(c.flow)
	if err != nil {
		return nil, err
	}
	t := mcpwire.TrimSpace(c.req.body)
	if ps, pe, ok, unique := mcpwire.MemberSpan(t, "params"); ok && unique {
		out := make([]byte, 0, len(t)+len(state)+len(answers)+len(`,"requestState":,"inputResponses":`))
		out = append(out, t[:ps]...)
		out, ok = mcpwire.AppendEdited(out, t[ps:pe],
			mcpwire.Edit{Name: "requestState", Value: state}, mcpwire.Edit{Name: "inputResponses", Value: answers})
		if ok {
			return append(out, t[pe:]...), nil
		}
	}
	p := maps.Clone(c.req.params)
	delete(p, "requestState")
	delete(p, "inputResponses")
	if state != nil {
		p["requestState"] = state
	}
	if answers != nil {
		p["inputResponses"] = answers
	}
	msg := maps.Clone(c.req.msg)
	if msg["params"], err = p.Encode(); err != nil {
		return nil, err
	}
	return msg.Encode()
}

// resumeMembers returns what a resume gives the upstream: its own
// requestState as finish sealed it (nil if it sent none) and the answers
// to the keys it asked, as one object (nil if none). A first call gives
// nothing.
func resumeMembers(fl *mrtr.Flow) (state, answers json.RawMessage, err error) {
	if !fl.Resumed() {
		return nil, nil, nil
	}
	var cont json.RawMessage // {"s": the upstream's state}, as finish sealed it
	if err := fl.Continuation(&cont); err == nil {
		state, _ = mcpwire.Member(mcpwire.TrimSpace(cont), "s")
	} else if !errors.Is(err, mrtr.ErrNoContinuation) {
		return nil, nil, err
	}
	for _, k := range fl.Asked() {
		v, ok := fl.Answer(k)
		if !ok {
			continue
		}
		raw, ok := v.(json.RawMessage)
		if !ok {
			return nil, nil, fmt.Errorf("answer %q is %T, not raw JSON", k, v)
		}
		if answers == nil {
			answers = append(make(json.RawMessage, 0, 64), '{')
		} else {
			answers = append(answers, ',')
		}
		answers = append(mcpwire.AppendString(answers, k), ':')
		answers = append(answers, raw...)
	}
	if answers != nil {
		answers = append(answers, '}')
	}
	return state, answers, nil
}

// forward sends a checked call to the upstream and relays its answer. It
// returns what settles the call's reservation (Flow.End): nil spends the
// token, an error releases it. A token is released only when the upstream
// provably did not run the call: the request never left the proxy (it
// could not be built, the upstream could not be reached, the transport
// failed before reading any of the body), or the upstream answered with a
// JSON-RPC error, as a handler's error releases its token in the guard.
// Once the request is on its way, anything else (a client hanging up, a
// timeout, a dropped connection, an unreadable, oversized or refused
// answer) leaves the token spent: the upstream may have run the call, and
// the same token must not run it again.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	body := c.req.body
	if c.flow.Resumed() || hasAny(c.req.params, "requestState", "inputResponses") {
		// Only a message that changes is rebuilt; its members are unique
		// (parseRequest), so the upstream reads what the proxy read.
		var err error
		if body, err = upstreamBody(c); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
	}
	// Sent under the proxy's own id, fresh for this call (pausable).
	var err error
	if b, ok := withID(body, c.x.sent); ok {
		body = b
	} else {
		rq := *c.req
		rq.body = body
		if rq.msg, err = mcpwire.ParseObject(body); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
		if body, err = requestWithID(&rq, c.x.sent); err != nil {
			return h.fail(w, r, c, "rebuild the upstream request", err, false)
		}
	}
	sent := &sentBody{b: body}
	var up *http.Request
	if h.stdTransport {
		// An *http.Transport writes the headers of a body it does not
		// know to be in memory on their own, ahead of the body (net/http
		// issue 22088): one more write and TCP segment per call. A
		// *bytes.Reader goes out with them in one, and the transport
		// reports the headers written, before any byte of the body
		// (every attempt: a retry is tracked too).
		c.x.trace.WroteHeaders, c.x.trace.GotConn = sent.wrote, c.x.gotConn
		tctx := httptrace.WithClientTrace(ctx, &c.x.trace)
		up, err = http.NewRequestWithContext(tctx, http.MethodPost, "", bytes.NewReader(body))
	} else {
		// A transport of the caller's own may still hand the request to
		// an *http.Transport (the bridge's pass-through does).
		c.x.trace.GotConn = c.x.gotConn
		tctx := httptrace.WithClientTrace(ctx, &c.x.trace)
		up, err = http.NewRequestWithContext(tctx, http.MethodPost, "", sent.reader())
		if err == nil {
			up.ContentLength = int64(len(body))
			up.GetBody = func() (io.ReadCloser, error) { return sent.reader(), nil } // a transport's retry is tracked too
		}
	}
	if err != nil {
		return h.fail(w, r, c, "build the upstream request", err, false)
	}
	// The upstream's URL without printing and parsing it again (target).
	*up.URL = *h.up
	if up.URL.RawQuery == "" {
		up.URL.RawQuery = r.URL.RawQuery
	}
	up.Host = strings.TrimSuffix(h.up.Host, ":") // as NewRequest sets it
	up.Header = h.outHeader(r)
	resp, err := h.tr.RoundTrip(up)
	if err != nil {
		return h.fail(w, r, c, "reach the upstream", err, sent.read.Load())
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The upstream refused the call itself (a header mismatch, an
		// unknown session, ...): its answer goes to the client as is.
		h.log.WarnContext(ctx, "proxy: upstream answered an HTTP error", "method", c.req.method, "target", mcpwire.Shown(c.target), "status", resp.StatusCode)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, h.maxHeld))
		status := resp.StatusCode
		b, v := h.restoreBody(ctx, c.x, b)
		if v == foreign {
			status = http.StatusOK
		}
		if h.watched {
			code := mrtr.CodeInternalError // an HTTP error without a JSON-RPC one
			if o, c := answerOutcome(b); o == mrtr.OutcomeError {
				code = c
			}
			if err := c.flow.Finish(ctx, mrtr.OutcomeError, code); err != nil {
				writeGuardError(w, c.req.id, err)
				return nil // it may have run the call before failing
			}
		}
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(status)
		_, _ = w.Write(b)
		if v != foreign && v != nullError && rpcError(b) {
			return errUpstreamRPC
		}
		return nil // it may have run the call before failing (an answer not its own: it may have run it)
	}
	if mcpwire.IsEventStream(resp.Header.Get("Content-Type")) {
		return h.relaySSE(ctx, w, resp, c)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, h.maxHeld+1))
	switch {
	case err != nil:
		return h.fail(w, r, c, "read the upstream response", err, true)
	case int64(len(b)) > h.maxHeld:
		return h.fail(w, r, c, "hold the upstream response", fmt.Errorf("it exceeds the held-message limit of %d bytes", h.maxHeld), true)
	}
	out, status, release := h.finish(ctx, c, b, nil)
	copyHeader(w.Header(), resp.Header, "Content-Type", "application/json", "Content-Length", strconv.Itoa(len(out)))
	if status == 0 {
		status = resp.StatusCode
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return release
}

// hasAny reports whether o has any of the members, null ones included.
func hasAny(o object, names ...string) bool {
	for _, n := range names {
		if _, ok := o[n]; ok {
			return true
		}
	}
	return false
}

// sentBody is the body of one upstream request. It records whether a
// transport ever read from it, or (an *http.Transport, through httptrace)
// wrote the request's headers: until then, no byte of the call's body can
// have reached the upstream, which therefore cannot have run it.
type sentBody struct {
	b    []byte
	read atomic.Bool
}

func (s *sentBody) wrote() { s.read.Store(true) }

func (s *sentBody) reader() io.ReadCloser { return &sentReader{s: s, r: bytes.NewReader(s.b)} }

type sentReader struct {
	s *sentBody
	r *bytes.Reader
}

func (sr *sentReader) Read(p []byte) (int, error) {
	sr.s.read.Store(true)
	return sr.r.Read(p)
}

func (sr *sentReader) Close() error { return nil }

// rpcError reports whether b is a JSON-RPC error response.
func rpcError(b []byte) bool {
	resp, err := parseResponse(b, nil)
	return err == nil && resp.result == nil
}

// fail answers a call the upstream did not answer: -32603 with the
// caller's id, and a log line naming the cause. sent tells whether the
// call may have reached the upstream: if not, the message says the call
// was not delivered and fail returns an error (the token is released, the
// same requestState may be sent again); if so, it returns nil (the token
// is spent: the upstream may have run the call).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, c *call, what string, err error, sent bool) error {
	h.log.ErrorContext(r.Context(), "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target),
		"upstream", shownURL(h.up), "step", what, "sent", sent, "error", err)
	_ = c.flow.Finish(r.Context(), mrtr.OutcomeError, mrtr.CodeInternalError) // the answer is an error already
	if sent {
		writeError(w, http.StatusOK, c.req.id, mrtr.CodeInternalError, msgFailedAfterSend, nil)
		return nil
	}
	writeError(w, http.StatusOK, c.req.id, mrtr.CodeInternalError, msgNotDelivered, nil)
	return fmt.Errorf("proxy: %s: %w", what, err)
}

// The messages of the proxy's -32603 answers to a call the upstream did
// not answer, which tell a client whether it may send the same
// requestState again.
const (
	// msgNotDelivered: the call never reached the upstream; a reserved
	// token was released.
	msgNotDelivered = "upstream unavailable: the call was not delivered"
	// msgFailedAfterSend: the call was sent and the upstream may have run
	// it; a reserved token stays spent (a retry with it is replayed).
	msgFailedAfterSend = "upstream failed after the call was sent"
)

// finish is finishMessage, with the answer reported to the guard's
// Auditor and Observer before it is sent (mrtr.Flow.Finish): an answer
// the audit trail could not record is replaced by a -32603 error.
func (h *Handler) finish(ctx context.Context, c *call, b []byte, msg object) (out []byte, status int, release error) {
	out, status, release = h.finishMessage(ctx, c, b, msg)
	if err := h.report(ctx, c, out); err != nil {
		return guardErrorBody(c.req.id, err), http.StatusOK, release
	}
	return out, status, release
}

// report tells the guard how the call was answered with out, unless it
// paused (its pause was recorded when it was sealed).
func (h *Handler) report(ctx context.Context, c *call, out []byte) error {
	if !h.watched {
		return nil
	}
	if _, paused := c.flow.Paused(); paused {
		return nil
	}
	outcome, code := answerOutcome(out)
	return c.flow.Finish(ctx, outcome, code)
}

// answerOutcome reads how a JSON-RPC response answered: its error's
// code, or a result with isError (tool_error), or a result.
func answerOutcome(out []byte) (mrtr.CallOutcome, int) {
	t := mcpwire.TrimSpace(out)
	if e, ok := mcpwire.Member(t, "error"); ok {
		code := mrtr.CodeInternalError
		if c, ok := mcpwire.Member(mcpwire.TrimSpace(e), "code"); ok {
			if n, err := strconv.Atoi(string(mcpwire.TrimSpace(c))); err == nil {
				code = n
			}
		}
		return mrtr.OutcomeError, code
	}
	if r, ok := mcpwire.Member(t, "result"); ok {
		if e, ok := mcpwire.Member(mcpwire.TrimSpace(r), "isError"); ok && string(mcpwire.TrimSpace(e)) == "true" {
			return mrtr.OutcomeToolError, 0
		}
	}
	return mrtr.OutcomeComplete, 0
}

// finishMessage turns the upstream's final message for c into the client's. It
// returns the message, an HTTP status to use instead of the upstream's (0
// keeps it) and what settles the reservation (see forward): errUpstreamRPC
// for a JSON-RPC error, which releases it; nil for everything else, since
// the upstream has run the call, whether its answer is passed on, sealed or
// refused.
//
// msg is b already parsed, or nil: every message is parsed once.
func (h *Handler) finishMessage(ctx context.Context, c *call, b []byte, msg object) (out []byte, status int, release error) {
	id := c.req.id
	resp, err := parseResponse(b, msg)
	if t := mcpwire.TrimSpace(b); err != nil && len(t) > 0 && t[0] == '[' {
		err = errForeign // a batch: no response of this request's
		c.refused = true
	}
	if err != nil {
		c.x.discard() // not a message this request's, whatever it is
		if c.refused {
			h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", err)
			return errorBody(id, mrtr.CodeInternalError, msgForeign, nil), http.StatusOK, nil
		}
		h.log.ErrorContext(ctx, "proxy: upstream answered garbage", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", err)
		return errorBody(id, mrtr.CodeInternalError, "upstream answered an invalid message", nil), http.StatusOK, nil
	}
	// The id is checked before anything of the answer is used, an
	// input_required sealed above all: a response of another request's
	// would be sealed under this caller's binding.
	switch c.x.judge(resp.msg) {
	case nullError:
		c.x.discard()
		h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", errNullID)
		return errorBody(id, mrtr.CodeInternalError, msgNullID, nil), http.StatusOK, nil
	case foreign:
		c.refused = true
		c.x.discard()
		h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", errForeign)
		return errorBody(id, mrtr.CodeInternalError, msgForeign, nil), http.StatusOK, nil
	}
	b, ok := c.x.restoreIDs(b, resp.msg, ours)
	if !ok {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	resp.msg["id"] = id
	return h.finishResponse(ctx, c, b, resp)
}

// finishResponse is finishMessage for the request's own response, its id
// already the caller's.
func (h *Handler) finishResponse(ctx context.Context, c *call, b []byte, resp *rpcResponse) (out []byte, status int, release error) {
	id := c.req.id
	var err error
	if resp.result == nil {
		return b, 0, errUpstreamRPC
	}
	if !resp.inputRequired() {
		return b, 0, nil
	}
	garbage := func(why string) ([]byte, int, error) {
		h.log.ErrorContext(ctx, "proxy: upstream answered an invalid input_required result", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", why)
		return errorBody(id, mrtr.CodeInternalError, "upstream answered an invalid message", nil), http.StatusOK, nil
	}
	var reqs object
	if resp.result.Has("inputRequests") {
		var ok bool
		if reqs, ok = resp.result.Object("inputRequests"); !ok {
			return garbage("inputRequests is not an object")
		}
	}
	caps := mcpwire.CapsFromParsedMeta(c.req.params["_meta"]) // params were validated with the request, reqs with the message
	if missing := mcpwire.MissingParsed(caps, reqs); len(missing) > 0 {
		if slices.Contains(missing, mcpwire.Unvettable) {
			return garbage("an input request is not a known {method, params} object")
		}
		h.log.InfoContext(ctx, "proxy: input request needs a capability the client did not declare", "method", c.req.method, "target", mcpwire.Shown(c.target), "missing", missing)
		return errorBody(id, mcpwire.CodeMissingCapability, mcpwire.MissingCapabilityMessage, mcpwire.MissingCapabilityData(missing...)), http.StatusBadRequest, nil
	}
	var cont json.RawMessage
	if resp.result.Has("requestState") {
		s := resp.result["requestState"]
		if s[0] != '"' {
			return garbage("requestState is not a string")
		}
		if len(s) > h.maxState {
			h.log.ErrorContext(ctx, "proxy: upstream requestState too large to seal", "method", c.req.method, "target", mcpwire.Shown(c.target), "bytes", len(s), "limit", h.maxState)
			return errorBody(id, mrtr.CodeInternalError, fmt.Sprintf("upstream requestState of %d bytes exceeds the proxy's limit of %d", len(s), h.maxState), nil), http.StatusOK, nil
		}
		cont = make(json.RawMessage, 0, len(s)+6)
		cont = append(append(append(cont, `{"s":`...), s...), '}')
	}
	asked := slices.Sorted(maps.Keys(reqs))
	inputs := make([]mrtr.Input, len(asked))
	for i, k := range asked {
		m, _ := mcpwire.Member(mcpwire.TrimSpace(reqs[k]), "method") // vetted above: a known method
		inputs[i].Key = k
		inputs[i].Method, _ = mcpwire.StringValue(m)
	}
	tok, err := c.flow.PauseInputs(cont, inputs...)
	if err != nil {
		var re *mrtr.RejectError
		if errors.As(err, &re) || errors.Is(err, mrtr.ErrInvalidArguments) {
			return guardErrorBody(id, err), http.StatusOK, nil
		}
		h.log.ErrorContext(ctx, "proxy: seal the upstream's pause", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", err)
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	var sealed bytes.Buffer
	if err := mcpwire.WriteString(&sealed, tok); err != nil {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	if out, ok := spliceState(b, sealed.Bytes()); ok {
		return out, 0, nil
	}
	resp.result["requestState"] = sealed.Bytes()
	if resp.msg["result"], err = resp.result.Encode(); err == nil {
		out, err = resp.msg.Encode()
	}
	if err != nil {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	return out, 0, nil
}

// spliceState returns the upstream's final message b, already validated,
// with result.requestState's value replaced by state (or the member
// added first in result when b has none), every other byte as the
// upstream wrote it. It refuses (false) when the message or its result
// repeats a member name, which finish then re-encodes from the parsed
// message, so no second requestState, the upstream's own, reaches the
// client.
func spliceState(b, state []byte) ([]byte, bool) {
	t := mcpwire.TrimSpace(b)
	rs, re, ok, unique := mcpwire.MemberSpan(t, "result")
	if !ok || !unique || t[rs] != '{' {
		return nil, false
	}
	ss, se, ok, unique := mcpwire.MemberSpan(t[rs:re], "requestState")
	if !unique {
		return nil, false
	}
	out := make([]byte, 0, len(t)+len(state)+len(`"requestState":,`))
	if ok {
		out = append(out, t[:rs+ss]...)
		out = append(out, state...)
		return append(out, t[rs+se:]...), true
	}
	if mcpwire.TrimSpace(t[rs+1 : re])[0] == '}' {
		return nil, false // an empty result: not input_required, never here
	}
	out = append(out, t[:rs+1]...)
	out = append(append(append(out, `"requestState":`...), state...), ',')
	return append(out, t[rs+1:]...), true
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
