package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
)

// failTransport is the next transport of an h1Transport under test that
// must not be used.
type failTransport struct{ t *testing.T }

func (f failTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("%s %s went to the fallback transport", r.Method, r.URL)
	return nil, errors.New("fallback used")
}

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	conns := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns
}

func testH1(t *testing.T, rawURL string, next http.RoundTripper) (*h1Transport, *url.URL) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if next == nil {
		next = failTransport{t}
	}
	h1 := newH1Transport(u.Host, next, (&net.Dialer{}).DialContext, 4)
	t.Cleanup(h1.CloseIdleConnections)
	return h1, u
}

func postTo(t *testing.T, ctx context.Context, u *url.URL, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func roundTrip(t *testing.T, rt http.RoundTripper, r *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := rt.RoundTrip(r)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the body: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("close the body: %v", err)
	}
	return resp, string(b)
}

// TestH1Request: the upstream gets the request line, Host, the header
// fields, Content-Length and the body as sent, nothing the transport
// would add (Accept-Encoding, a User-Agent), in one write; one connection
// carries every request in turn.
func TestH1Request(t *testing.T) {
	type seen struct {
		method, uri, host, body string
		header                  http.Header
		length                  int64
	}
	got := make(chan seen, 10)
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, string(b), r.Header, r.ContentLength}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	h1, u := testH1(t, srv.URL+"/mcp?session=a%20b", nil)
	writes := new(atomic.Int32)
	dial := h1.dial
	h1.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return peekableCountConn{countConn{c, writes}, c.(syscall.Conn)}, nil
	}
	for i := range 10 {
		r := postTo(t, t.Context(), u, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		r.Header.Set("Content-Type", "application/json")
		r.Header["X-Two"] = []string{"a", "b"}
		resp, body := roundTrip(t, h1, r)
		if resp.StatusCode != 200 || body != `{"ok":true}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("response %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
		s := <-got
		if s.method != "POST" || s.uri != "/mcp?session=a%20b" || s.host != u.Host || s.body != `{"jsonrpc":"2.0","id":1,"method":"tools/call"}` || s.length != int64(len(s.body)) {
			t.Fatalf("request %d: %+v", i, s)
		}
		if s.header.Get("Content-Type") != "application/json" || strings.Join(s.header["X-Two"], ",") != "a,b" {
			t.Fatalf("request %d header: %v", i, s.header)
		}
		for _, k := range []string{"Accept-Encoding", "User-Agent"} {
			if v, ok := s.header[k]; ok {
				t.Fatalf("request %d: the transport added %s: %q", i, k, v)
			}
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("10 requests in turn took %d connections, want 1", n)
	}
	if n := writes.Load(); n != 10 {
		t.Fatalf("10 requests took %d writes, want 10", n)
	}
}

// TestH1Fallback: what the transport does not send itself (a GET, a body
// of unknown length, an upgrade, another host) goes to next.
func TestH1Fallback(t *testing.T) {
	var next atomic.Int32
	nextRT := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		next.Add(1)
		return &http.Response{StatusCode: 204, Body: http.NoBody, Header: http.Header{}}, nil
	})
	h1, u := testH1(t, "http://127.0.0.1:1/mcp", nextRT)
	get, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	unknown := postTo(t, t.Context(), u, "{}")
	unknown.ContentLength = -1
	upgrade := postTo(t, t.Context(), u, "{}")
	upgrade.Header.Set("Upgrade", "h2c")
	other := postTo(t, t.Context(), &url.URL{Scheme: "http", Host: "127.0.0.1:2", Path: "/"}, "{}")
	for _, r := range []*http.Request{get, unknown, upgrade, other} {
		if _, err := h1.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := next.Load(); n != 4 {
		t.Fatalf("%d of 4 requests went to next", n)
	}
}

// peekableCountConn is a countConn connAlive can still peek at: a
// connection it cannot check is never kept.
type peekableCountConn struct {
	countConn
	sc syscall.Conn
}

func (c peekableCountConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestH1InvalidHeader: a header field *http.Transport refuses is refused
// before anything is written, and the connection serves the next request.
func TestH1InvalidHeader(t *testing.T) {
	var requests atomic.Int32
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, nil)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	for _, bad := range []func(http.Header){
		func(h http.Header) { h["X-Bad"] = []string{"a\r\nX-Injected: 1"} },
		func(h http.Header) { h["X-Bad"] = []string{"nul\x00"} },
		func(h http.Header) { h["Bad Name"] = []string{"v"} },
		func(h http.Header) { h["X:Colon"] = []string{"v"} },
	} {
		r := postTo(t, t.Context(), u, "{}")
		bad(r.Header)
		if resp, err := h1.RoundTrip(r); err == nil {
			resp.Body.Close()
			t.Fatalf("header %v was sent", r.Header)
		}
	}
	spaced := postTo(t, t.Context(), u, "{}")
	spaced.URL.RawQuery = "a b HTTP/1.1\r\nX-Injected: 1"
	if resp, err := h1.RoundTrip(spaced); err == nil {
		resp.Body.Close()
		t.Fatalf("request URI %q was sent", spaced.URL.RequestURI())
	}
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	if n, c := requests.Load(), conns.Load(); n != 2 || c != 1 {
		t.Fatalf("the upstream got %d requests on %d connections, want 2 on 1", n, c)
	}
}

// serveConns runs handle on every connection to a loopback listener,
// closed at the test's end, and returns its URL with path.
func serveConns(t *testing.T, path string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return "http://" + ln.Addr().String() + path
}

// oneShotServer answers each connection's first request and closes the
// connection, sending on closed once it did.
func oneShotServer(t *testing.T, closed chan<- struct{}) string {
	t.Helper()
	return serveConns(t, "/mcp", func(c net.Conn) {
		defer func() { c.Close(); closed <- struct{}{} }()
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		// Keep-alive as far as the header goes: the close comes after.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
}

// TestH1ServerClosedIdle: an idle connection the upstream closed is not
// used: the next request goes on a new one and succeeds.
func TestH1ServerClosedIdle(t *testing.T) {
	closed := make(chan struct{}, 4)
	h1, u := testH1(t, oneShotServer(t, closed), nil)
	for i := range 3 {
		if _, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); body != "ok" {
			t.Fatalf("request %d: %q", i, body)
		}
		<-closed
	}
}

// TestH1ConnectionClose: a response that closes its connection, or a
// request that asks to, leaves nothing idle.
func TestH1ConnectionClose(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("close") {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, nil)
	closing := *u
	closing.RawQuery = "close"
	roundTrip(t, h1, postTo(t, t.Context(), &closing, "{}"))
	r := postTo(t, t.Context(), u, "{}")
	r.Close = true
	roundTrip(t, h1, r)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	if n := conns.Load(); n != 3 {
		t.Fatalf("3 requests, the first two closing, took %d connections, want 3", n)
	}
}

// TestH1EarlyClose: a body closed before its end closes its connection.
func TestH1EarlyClose(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 100<<10))
	}))
	h1, u := testH1(t, srv.URL, nil)
	resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 10)); err == nil {
		t.Fatal("a closed body reads")
	}
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	if n := len(h1.idle); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
}

// TestH1Cancel: the request's context ends a round trip waiting for the
// response and a read waiting for the body, with its own error.
func TestH1Cancel(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	defer close(release)
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("headers") {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		<-release
	}))
	h1, u := testH1(t, srv.URL, nil)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		resp, err := h1.RoundTrip(postTo(t, ctx, u, "{}"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("round trip after cancel: %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	withHeaders := *u
	withHeaders.RawQuery = "headers"
	resp, err := h1.RoundTrip(postTo(t, ctx, &withHeaders, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	go cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("body read after cancel: %v, want context.Canceled", err)
	}
	resp.Body.Close()
	if n := len(h1.idle); n != 0 {
		t.Fatalf("%d idle connections after two canceled requests, want 0", n)
	}
}

// rawServer answers every request on a connection with reply.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	return serveConns(t, "/", func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			if _, err := io.WriteString(c, reply); err != nil {
				return
			}
		}
	})
}

// TestH1Informational: 1xx responses before the response are skipped, a
// 101 nobody asked for is an error.
func TestH1Informational(t *testing.T) {
	h1, u := testH1(t, rawServer(t, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), nil)
	for range 2 {
		if resp, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	h1, u = testH1(t, rawServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"), nil)
	if resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}")); !errors.Is(err, errH1Upgrade) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("an unasked 101: %v", err)
	}
	// More than five, as *http.Transport (Go 1.26) takes them: bounded
	// by the header budget, not by count (issue 27 item 10).
	h1, u = testH1(t, rawServer(t, strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 20)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), nil)
	if resp, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("after 20 1xx responses: %d %q", resp.StatusCode, body)
	}
	hint := "HTTP/1.1 103 Early Hints\r\nX-Pad: " + strings.Repeat("p", 1<<20) + "\r\n\r\n"
	h1, u = testH1(t, rawServer(t, strings.Repeat(hint, h1MaxHeaderBytes>>20+1)+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), nil)
	if resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}")); !errors.Is(err, errH1HeaderTooLarge) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("1xx responses past the header budget: %v, want errH1HeaderTooLarge", err)
	}
}

// TestH1Streams: a chunked event stream is read as it comes, event by
// event, and its connection kept after its end.
func TestH1Streams(t *testing.T) {
	next := make(chan struct{})
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-next
		_, _ = io.WriteString(w, "data: 2\n\n")
	}))
	h1, u := testH1(t, srv.URL, nil)
	for range 2 {
		resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.TransferEncoding == nil || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("transfer encoding %v, want chunked", resp.TransferEncoding)
		}
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "data: 1\n" {
			t.Fatalf("first event: %q, %v", line, err)
		}
		next <- struct{}{} // the second event is written only after the first was read
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "\ndata: 2\n\n" {
			t.Fatalf("rest: %q, %v", rest, err)
		}
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// TestH1Idle: at most maxIdle connections wait; one idle for idleTimeout
// is closed, never used.
func TestH1Idle(t *testing.T) {
	const inFlight = 6
	var arrived sync.WaitGroup
	arrived.Add(inFlight)
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("wait") {
			arrived.Done()
			arrived.Wait()
		}
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, nil)
	wait := *u
	wait.RawQuery = "wait"
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() { roundTrip(t, h1, postTo(t, t.Context(), &wait, "{}")) })
	}
	wg.Wait()
	if n := len(h1.idle); n != h1.maxIdle {
		t.Fatalf("%d idle after %d at once, want %d", n, inFlight, h1.maxIdle)
	}
	h1.CloseIdleConnections()
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	h1.mu.Lock()
	h1.idle[0].used = time.Now().Add(-h1.idleTimeout)
	h1.mu.Unlock()
	before := conns.Load()
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	if n := conns.Load() - before; n != 1 {
		t.Fatalf("the request after an expired idle connection opened %d connections, want 1", n)
	}
	if n := len(h1.idle); n != 1 {
		t.Fatalf("%d idle, want 1", n)
	}
}

// TestH1WroteHeaders: the httptrace hook the proxy settles tokens by is
// called once the request is written, and not for one never sent.
func TestH1WroteHeaders(t *testing.T) {
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	h1, u := testH1(t, srv.URL, nil)
	var wrote atomic.Int32
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{WroteHeaders: func() { wrote.Add(1) }})
	roundTrip(t, h1, postTo(t, ctx, u, "{}"))
	if n := wrote.Load(); n != 1 {
		t.Fatalf("WroteHeaders called %d times, want 1", n)
	}
	h1, u = testH1(t, "http://127.0.0.1:1/", nil) // nothing listens on port 1
	if resp, err := h1.RoundTrip(postTo(t, ctx, u, "{}")); err == nil {
		resp.Body.Close()
		t.Fatal("a request reached port 1")
	}
	if n := wrote.Load(); n != 1 {
		t.Fatalf("WroteHeaders called for a request never sent")
	}
}

// TestDirectHTTP: the proxy's own transport serves plain-HTTP upstreams
// reached without an HTTP proxy; TLS upstreams, proxied ones and
// transports of the caller's get what they asked for.
func TestDirectHTTP(t *testing.T) {
	none := func(*http.Request) (*url.URL, error) { return nil, nil }
	via := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") }
	for _, c := range []struct {
		up    string
		proxy func(*http.Request) (*url.URL, error)
		want  bool
	}{
		{"http://127.0.0.1:8080/mcp", none, true},
		{"http://127.0.0.1:8080/mcp", nil, true},
		{"http://mcp.example/mcp", via, false},
		{"https://mcp.example/mcp", none, false},
	} {
		u, _ := url.Parse(c.up)
		if got := directHTTP(u, c.proxy); got != c.want {
			t.Errorf("directHTTP(%s) = %v, want %v", c.up, got, c.want)
		}
	}
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := mrtr.New(reqstate.New(ring, nil), nil)
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Upstream: "http://127.0.0.1:8080/mcp"}, "*proxy.h1Transport"},
		{Options{Upstream: "https://127.0.0.1:8443/mcp"}, "*http.Transport"},
		{Options{Upstream: "http://127.0.0.1:8080/mcp", Transport: roundTripFunc(nil)}, "proxy.roundTripFunc"},
	} {
		c.opts.Guard = g
		h, err := New(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := typeName(h.tr.(*watchedTransport).next); got != c.want {
			t.Errorf("%s: transport %s, want %s", c.opts.Upstream, got, c.want)
		}
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// TestH1HeaderLimit: a response header past h1MaxHeaderBytes is refused,
// not held in memory.
func TestH1HeaderLimit(t *testing.T) {
	big := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", h1MaxHeaderBytes) + "\r\nContent-Length: 0\r\n\r\n"
	h1, u := testH1(t, rawServer(t, big), nil)
	resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("a header past the limit was read")
	}
	if !errors.Is(err, errH1HeaderTooLarge) {
		t.Fatalf("error %v, want errH1HeaderTooLarge", err)
	}
	ok := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("b", 70000)
	h1, u = testH1(t, rawServer(t, ok), nil)
	if _, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); len(body) != 70000 {
		t.Fatalf("a body under a large header: %d bytes", len(body))
	}
}
