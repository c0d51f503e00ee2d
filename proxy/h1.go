package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h1Transport sends the proxy's requests whose body is in memory (every
// POST: ServeHTTP reads them all) to a plain-HTTP upstream over HTTP/1.1,
// on the caller's goroutine: the request goes out in one write, the
// response is read by net/http's own parser (http.ReadResponse) from the
// connection, and the connection waits for the next request once its body
// was read to the end. An *http.Transport hands every request to two
// goroutines of its own per connection, a writer and a reader, and back:
// under load those handoffs and the wakeups they cost were a tenth of the
// proxy's CPU (TestProxyCPU). Anything else (GET streams, bodies of
// unknown length, upgrades, other hosts) goes to next, the *http.Transport
// the proxy would otherwise use, as do upstreams reached through an HTTP
// proxy or over TLS (New never builds an h1Transport for them).
//
// Bodies above h1MaxBody go to next too: an upstream may answer a large
// body early (a 413) and stop reading it, and only a transport that reads
// while it writes sees that answer.
//
// It keeps what the proxy relies on from *http.Transport: dials bounded by
// the dial timeout, at most maxIdle idle connections, each closed once
// idle for idleTimeout; a request's context cancels it at any point, its
// body included; an idle connection the upstream closed, or sent anything
// on unasked, is never used, and one that cannot be checked for that (not
// a socket this platform can peek at, see connAlive) is never kept; a
// request on a reused connection that fails before any byte was written
// is sent again on a new one, as *http.Transport does; httptrace's
// WroteHeaders hook is called once the request may have left, and its
// GotConn hook with the connection a request goes out on. It sends no
// Accept-Encoding of its own and no default User-Agent, as the proxy's
// requests carry none (outHeader, httputil.ReverseProxy). New builds it
// only where the platform can peek at a socket (LeanTransportSupported).
type h1Transport struct {
	next        http.RoundTripper
	host        string // the upstream's host[:port], as in its URL
	addr        string // host:port to dial
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration

	mu   sync.Mutex
	idle []*h1Conn // the most recently used last
}

// h1Conn is one connection to the upstream and its read buffer.
type h1Conn struct {
	c     net.Conn
	lim   limitedConn // what br reads from
	br    *bufio.Reader
	wbuf  []byte      // the last request's bytes, reused
	used  time.Time   // when it went idle; under the transport's mu
	timer *time.Timer // closes it once idle for idleTimeout; nil until first idle
	// checkable: connAlive can tell whether the upstream closed c or sent
	// on it unasked; a connection it cannot check is never kept idle.
	checkable bool
	reused    bool // it served a request before this one
}

// limitedConn reads from c at most n bytes, then fails: a response header
// is read under h1MaxHeaderBytes, as *http.Transport bounds it by its
// MaxResponseHeaderBytes.
type limitedConn struct {
	c net.Conn
	n int64
}

var errH1HeaderTooLarge = errors.New("proxy: the upstream's response header is too large")

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errH1HeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.c.Read(p)
	l.n -= int64(n)
	return n, err
}

// h1MaxHeaderBytes bounds a response's header (with any 1xx before it),
// *http.Transport's default MaxResponseHeaderBytes.
const h1MaxHeaderBytes = 10 << 20

// h1MaxKeptBuffer bounds the request buffer a connection keeps between
// requests; a larger request's buffer is dropped after it.
const h1MaxKeptBuffer = 64 << 10

// h1MaxBody is the largest request body h1Transport sends itself. A
// net/http server reads up to 256 KiB of a body its handler left unread
// before it answers and keeps the connection (its maxPostHandlerReadBytes);
// past that a server answering early (a 413) closes with the body still
// coming, and only a transport reading while it writes, next, gets the
// answer rather than a broken pipe.
const h1MaxBody = 256 << 10

// The informational (1xx) responses before a response are bounded, with
// it, by h1MaxHeaderBytes, as *http.Transport bounds them since Go 1.26:
// not by count.

// errH1Upgrade is a 101 answer to a request that asked for no upgrade.
var errH1Upgrade = errors.New("proxy: the upstream switched protocols unasked")

// directHTTP reports whether the proxy's own transport reaches the
// upstream u itself: plain HTTP, and no HTTP proxy between (proxyOf is
// the *http.Transport's Proxy, from the environment by default).
func directHTTP(u *url.URL, proxyOf func(*http.Request) (*url.URL, error)) bool {
	if u.Scheme != "http" {
		return false
	}
	if proxyOf == nil {
		return true
	}
	p, err := proxyOf(&http.Request{URL: u, Header: http.Header{}})
	return err == nil && p == nil
}

// newH1Transport returns an h1Transport to the plain-HTTP upstream at
// host (its URL's) that sends what it does not handle to next.
func newH1Transport(host string, next http.RoundTripper, dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int) *h1Transport {
	return &h1Transport{next: next, host: host, addr: dialAddr(host), dial: dial, maxIdle: maxIdle, idleTimeout: 90 * time.Second}
}

// dialAddr is the host:port to dial for a URL's host: port 80 when it has
// none or an empty one ("host:"), as net/http dials.
func dialAddr(host string) string {
	u := url.URL{Host: host}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// handles reports whether the request is one h1Transport sends itself: a
// POST to its upstream with a body of known length up to h1MaxBody. A
// ContentLength of 0 with a body means, to net/http, a body of unknown
// length (it reads it to tell), so that request goes to next.
func (t *h1Transport) handles(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Scheme == "http" && r.URL.Host == t.host &&
		r.ContentLength >= 0 && r.ContentLength <= h1MaxBody &&
		(r.ContentLength == 0) == (r.Body == nil || r.Body == http.NoBody) && r.Trailer == nil &&
		len(r.Header["Upgrade"]) == 0 && len(r.TransferEncoding) == 0
}

func (t *h1Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.handles(r) {
		return t.next.RoundTrip(r)
	}
	ctx := r.Context()
	if err := ctx.Err(); err != nil {
		closeBody(r)
		return nil, err
	}
	cn, err := t.get(ctx)
	if err != nil {
		closeBody(r)
		return nil, err
	}
	gotConn(ctx, cn)
	b, err := appendRequest(cn.wbuf[:0], r)
	if err != nil {
		t.put(cn) // nothing was written on it
		return nil, err
	}
	for {
		resp, err := t.send(ctx, cn, b, r)
		if err == nil {
			return resp, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		var nw nothingWritten
		if !errors.As(err, &nw) || !cn.reused {
			return nil, fmt.Errorf("proxy: upstream connection: %w", err)
		}
		// The upstream closed the connection it had kept before this
		// request reached it: what *http.Transport sends again, here on a
		// new connection, never a reused one (the request is in b).
		if cn, err = t.dialConn(ctx); err != nil {
			return nil, err
		}
		gotConn(ctx, cn)
	}
}

// gotConn calls httptrace's GotConn hook, as *http.Transport does: the
// proxy closes the connection of an answer that was not its request's.
func gotConn(ctx context.Context, cn *h1Conn) {
	if tr := httptrace.ContextClientTrace(ctx); tr != nil && tr.GotConn != nil {
		tr.GotConn(httptrace.GotConnInfo{Conn: cn.c, Reused: cn.reused})
	}
}

// connState is what connAlive tells of a connection.
type connState int

const (
	connIdle      connState = iota // open, nothing unread: it may carry a request
	connDirty                      // closed, or bytes came unasked: never to be used
	connUnchecked                  // not a socket connAlive can peek at
)

// nothingWritten is a write that failed before any byte of the request
// left.
type nothingWritten struct{ err error }

func (e nothingWritten) Error() string { return e.err.Error() }
func (e nothingWritten) Unwrap() error { return e.err }

// send writes the request b on cn and reads the response's header. On an
// error it has closed cn.
func (t *h1Transport) send(ctx context.Context, cn *h1Conn, b []byte, r *http.Request) (*http.Response, error) {
	if cap(b) <= h1MaxKeptBuffer {
		cn.wbuf = b[:0]
	} else {
		cn.wbuf = nil
	}
	stop := context.AfterFunc(ctx, func() { _ = cn.c.SetDeadline(time.Unix(1, 0)) })
	n, werr := cn.c.Write(b)
	if n > 0 {
		if tr := httptrace.ContextClientTrace(ctx); tr != nil && tr.WroteHeaders != nil {
			tr.WroteHeaders()
		}
	}
	if werr != nil && n == 0 {
		stop()
		_ = cn.c.Close()
		return nil, nothingWritten{werr}
	}
	// After a failed write the upstream may still have answered what it
	// read (an early 413 before it closed): the answer is read, the
	// connection never kept.
	cn.lim.n = h1MaxHeaderBytes
	resp, err := readH1Response(cn.br, r)
	cn.lim.n = math.MaxInt64
	if err != nil {
		stop()
		_ = cn.c.Close()
		if werr != nil {
			err = werr
		}
		return nil, err
	}
	reuse := werr == nil && !resp.Close && !r.Close && cn.checkable
	resp.Body = &h1Body{t: t, cn: cn, ctx: ctx, stop: stop, body: resp.Body, reuse: reuse}
	return resp, nil
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

// appendRequest appends r's bytes on the wire to b: the request line, the
// header (the fields *http.Transport would send, refused on the same
// invalid names and values) and the body, which it reads and closes.
func appendRequest(b []byte, r *http.Request) ([]byte, error) {
	defer closeBody(r)
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	if !validHost(host) {
		return nil, errors.New("proxy: invalid Host header")
	}
	host = removeZone(host)
	uri := r.URL.RequestURI()
	if strings.ContainsFunc(uri, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return nil, errors.New("proxy: invalid request URI")
	}
	b = append(b, "POST "...)
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range r.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
			continue
		}
		if !validName(k) {
			return nil, fmt.Errorf("proxy: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !validValue(v) {
				return nil, fmt.Errorf("proxy: invalid header field value for %q", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if r.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, r.ContentLength, 10)
	b = append(b, "\r\n\r\n"...)
	if r.ContentLength > 0 {
		n := len(b)
		b = slices.Grow(b, int(r.ContentLength))[:n+int(r.ContentLength)]
		if _, err := io.ReadFull(r.Body, b[n:]); err != nil {
			return nil, fmt.Errorf("proxy: read the request body: %w", err)
		}
	}
	return b, nil
}

// validHost reports whether h, not empty, holds only bytes of a URI host
// and port (RFC 3986: unreserved, sub-delims, pct-encoded, the brackets
// and colon of an IPv6 literal and a port): the bytes net/http accepts in
// a Host header (httpguts.ValidHostHeader), so that no field or request is
// smuggled through it. net/http sends an empty Host for an invalid one;
// this transport refuses the request. A name beyond ASCII, which net/http
// turns into punycode, is refused too.
func validHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// removeZone drops the zone of an IPv6 literal host ("[fe80::1%en0]:80"),
// which RFC 6874 says an HTTP client must not send, as net/http does.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndexByte(host, ']')
	if i < 0 {
		return host
	}
	j := strings.LastIndexByte(host[:i], '%')
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}

// validName reports whether k is an HTTP token (RFC 9110, 5.1).
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || isSeparator(c) {
			return false
		}
	}
	return true
}

func isSeparator(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '@', ',', ';', ':', '\\', '"', '/', '[', ']', '?', '=', '{', '}':
		return true
	}
	return false
}

// validValue reports whether v holds no control character but tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// readH1Response reads the response to r, skipping informational ones;
// the caller bounds them all by the bytes it lets br read.
func readH1Response(br *bufio.Reader, r *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, r)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errH1Upgrade
		case resp.StatusCode >= 200:
			return resp, nil
		}
	}
}

// get returns an idle connection the upstream has neither closed nor sent
// anything on, or a new one.
func (t *h1Transport) get(ctx context.Context) (*h1Conn, error) {
	now := time.Now()
	t.mu.Lock()
	for len(t.idle) > 0 {
		cn := t.idle[len(t.idle)-1]
		t.idle[len(t.idle)-1] = nil
		t.idle = t.idle[:len(t.idle)-1]
		t.mu.Unlock()
		cn.timer.Stop()
		if now.Sub(cn.used) < t.idleTimeout && cn.br.Buffered() == 0 && connAlive(cn.c) == connIdle {
			cn.reused = true
			return cn, nil
		}
		_ = cn.c.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	return t.dialConn(ctx)
}

// dialConn returns a new connection to the upstream.
func (t *h1Transport) dialConn(ctx context.Context) (*h1Conn, error) {
	c, err := t.dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	cn := &h1Conn{c: c, lim: limitedConn{c: c}, checkable: connAlive(c) != connUnchecked}
	cn.br = bufio.NewReaderSize(&cn.lim, 4096)
	return cn, nil
}

// put keeps cn for the next request, unless maxIdle are kept already or
// connAlive cannot check it, and closes it once idle for idleTimeout.
func (t *h1Transport) put(cn *h1Conn) {
	if !cn.checkable {
		_ = cn.c.Close()
		return
	}
	t.mu.Lock()
	keep := len(t.idle) < t.maxIdle
	if keep {
		cn.used = time.Now()
		t.idle = append(t.idle, cn)
		if cn.timer == nil {
			cn.timer = time.AfterFunc(t.idleTimeout, func() { t.expire(cn) })
		} else {
			cn.timer.Reset(t.idleTimeout)
		}
	}
	t.mu.Unlock()
	if !keep {
		_ = cn.c.Close()
	}
}

// expire closes cn if it is still idle and has been for idleTimeout (a
// timer that fired as cn was taken, and put back, finds it otherwise).
func (t *h1Transport) expire(cn *h1Conn) {
	t.mu.Lock()
	i := slices.Index(t.idle, cn)
	if i < 0 || time.Since(cn.used) < t.idleTimeout {
		t.mu.Unlock()
		return
	}
	t.idle = slices.Delete(t.idle, i, i+1)
	t.mu.Unlock()
	_ = cn.c.Close()
}

// CloseIdleConnections closes the idle connections of both transports.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cn := range idle {
		cn.timer.Stop()
		_ = cn.c.Close()
	}
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// h1Body is a response body on an h1Conn: read to the end and closed, it
// gives the connection back; closed early, or after its context ended, it
// closes the connection. Close may be called while a Read waits: it
// closes the connection, which ends the Read.
type h1Body struct {
	t     *h1Transport
	cn    *h1Conn
	ctx   context.Context
	stop  func() bool // the context's hook on the connection
	body  io.ReadCloser
	reuse bool // neither side asked to close the connection
	eof   atomic.Bool
	done  atomic.Bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, errors.New("proxy: read on a closed response body")
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
	case err != nil:
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	return n, err
}

func (b *h1Body) Close() error {
	if !b.done.CompareAndSwap(false, true) {
		return nil
	}
	if b.stop() && b.eof.Load() && b.reuse {
		b.t.put(b.cn)
		return nil
	}
	return b.cn.c.Close()
}
