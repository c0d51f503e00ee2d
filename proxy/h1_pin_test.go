package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The tests of this file pin issue 27 items 2 and 10 and the h1 mutants
// of its mutation audit, each seen failing on the code before the fix.

// plainConn hides a connection's socket: connAlive cannot peek at it, as
// on a platform without a socket peek, or a wrapper's conn on Linux.
type plainConn struct{ net.Conn }

func plainDial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

// wait receives from c, failing the test fast with what it waited for
// instead of hanging until the test binary's timeout.
func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		panic("unreachable")
	}
}

// strayServer answers each request with "reply N" (N the request's X-N)
// and, once the client says it read that reply (on read), sends a whole
// second response carrying the same N on the idle connection, then says
// so on sent. inline sends it in the same write as the reply instead.
func strayServer(t *testing.T, inline bool, read <-chan struct{}, sent chan<- struct{}, conns *atomic.Int32) string {
	t.Helper()
	return serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			n := r.Header.Get("X-N")
			reply := "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nreply " + n
			stray := "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nstray " + n
			if inline {
				_, _ = io.WriteString(c, reply+stray)
				continue
			}
			_, _ = io.WriteString(c, reply)
			select {
			case <-read:
			case <-time.After(10 * time.Second):
				return
			}
			_, _ = io.WriteString(c, stray)
			sent <- struct{}{}
		}
	})
}

// strayRounds sends requests 1 and 2 in turn on h1 and fails the test if
// the second got anything but its own reply. between runs after the
// first reply was read to its end and its body closed.
func strayRounds(t *testing.T, h1 *h1Transport, url string, between func()) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"1", "2"} {
		r := postTo(t, t.Context(), u, "{}")
		r.Header.Set("X-N", n)
		resp, body := roundTrip(t, h1, r)
		if resp.StatusCode != 200 || body != "reply "+n {
			t.Fatalf("request %s got %d %q, want its own reply %q", n, resp.StatusCode, body, "reply "+n)
		}
		if i == 0 && between != nil {
			between()
		}
	}
}

// TestH1UncheckedNotReused pins issue 27 item 2: a connection connAlive
// cannot peek at (h1_nopeek.go's platforms; a wrapped conn on Linux) is
// closed after its response, never kept, so the bytes an upstream sends
// after a response cannot become the next caller's response. Before the
// fix connAlive said true and request 2 read "stray 1".
func TestH1UncheckedNotReused(t *testing.T) {
	read, sent := make(chan struct{}), make(chan struct{})
	conns := new(atomic.Int32)
	url := strayServer(t, false, read, sent, conns)
	h1, _ := testH1(t, url, nil)
	h1.dial = plainDial
	strayRounds(t, h1, url, func() {
		read <- struct{}{}
		wait(t, sent, "stray response sent")
	})
	if n := len(h1.idle); n != 0 {
		t.Fatalf("%d connections that cannot be checked kept idle, want 0", n)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("2 requests took %d connections, want 2 (none reused)", n)
	}
}

// TestH1UncheckedIdleClose pins the other half of item 2: the first call
// after an upstream closed its idle connection failed (and spent its
// token, the request written) where the connection could not be peeked
// at. Every call now succeeds.
func TestH1UncheckedIdleClose(t *testing.T) {
	closed := make(chan struct{}, 4)
	h1, u := testH1(t, oneShotServer(t, closed), nil)
	h1.dial = plainDial
	for i := range 3 {
		if _, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); body != "ok" {
			t.Fatalf("request %d: %q", i, body)
		}
		wait(t, closed, "upstream close")
	}
}

// TestH1StrayBytesBuffered pins the mutant "an idle connection with
// buffered bytes reused": a second response sent in the same write as
// the first sits in the connection's read buffer, where no peek at the
// socket sees it; the connection must not carry request 2.
func TestH1StrayBytesBuffered(t *testing.T) {
	conns := new(atomic.Int32)
	url := strayServer(t, true, nil, nil, conns)
	h1, _ := testH1(t, url, nil)
	strayRounds(t, h1, url, nil)
	if n := conns.Load(); n != 2 {
		t.Fatalf("2 requests took %d connections, want 2", n)
	}
}

// TestH1StrayBytesPeeked: a second response that reaches the idle
// connection's socket after the first was read is seen by the peek, and
// the connection closed (mutant: connAlive saying connIdle always).
func TestH1StrayBytesPeeked(t *testing.T) {
	read, sent := make(chan struct{}), make(chan struct{})
	conns := new(atomic.Int32)
	url := strayServer(t, false, read, sent, conns)
	h1, _ := testH1(t, url, nil)
	strayRounds(t, h1, url, func() {
		read <- struct{}{}
		wait(t, sent, "stray response sent")
	})
	if n := conns.Load(); n != 2 {
		t.Fatalf("2 requests took %d connections, want 2", n)
	}
}

// TestH1RedialNothingWritten pins item 10's "no redial when nothing was
// written on a reused connection": an idle connection that passes the
// peek but fails the write before any byte (here: its sending side shut,
// the upstream keeping it open) is what *http.Transport sends again on;
// so does h1, on a new connection, and the call succeeds. The upstream
// keeps the connection open until the test ends: one that closed it after
// the client's FIN would, on a busy machine, be seen closed by the peek
// first, and the redial never tried.
func TestH1RedialNothingWritten(t *testing.T) {
	conns := new(atomic.Int32)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	url := serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				// Keep the connection open after the client's FIN: the
				// peek sees nothing wrong with it.
				<-stop
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	h1, u := testH1(t, url, nil)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	h1.mu.Lock()
	if len(h1.idle) != 1 {
		h1.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(h1.idle))
	}
	_ = h1.idle[0].c.(*net.TCPConn).CloseWrite()
	h1.mu.Unlock()
	if resp, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	// A write that fails on a new connection is not sent again. A second
	// dial fails, so that a transport that would redial without end (the
	// mutant at h1.go's redial) stops and says so instead of hanging.
	h1, u = testH1(t, url, nil)
	var dials atomic.Int32
	h1.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) > 1 {
			return nil, errors.New("test: dialed again")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		return c, err
	}
	if resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}")); err == nil {
		resp.Body.Close()
		t.Fatal("a request whose write failed on a new connection succeeded")
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("a request whose write failed on a new connection was sent again: %d dials, want 1", n)
	}
}

// TestH1IdleTimer pins item 10's "idle connections reaped only on the
// next request": an idle connection is closed once idle for idleTimeout,
// with no request after it.
func TestH1IdleTimer(t *testing.T) {
	gone := make(chan struct{}, 1)
	url := serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				gone <- struct{}{}
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	h1, u := testH1(t, url, nil)
	h1.idleTimeout = 20 * time.Millisecond
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	wait(t, gone, "close of the idle connection")
	h1.mu.Lock()
	n := len(h1.idle)
	h1.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d idle connections after their timeout, want 0", n)
	}
}

// TestH1EarlyAnswer pins item 10's "an early 413 to a large body is lost
// while the whole body is written": an upstream that answers before it
// reads a large body, and then neither reads nor closes, is heard at once
// (before the fix the write waited for the upstream to read, until the
// request's deadline).
func TestH1EarlyAnswer(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	url := serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
		<-done
	})
	h1, u := testH1(t, url, http.DefaultTransport.(*http.Transport).Clone())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r := postTo(t, ctx, u, strings.Repeat("x", 16<<20))
	resp, err := h1.RoundTrip(r)
	if err != nil {
		t.Fatalf("no early answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(body) != "too big!" {
		t.Fatalf("%d %q, want the early 413", resp.StatusCode, body)
	}
}

// TestH1HostValidation pins item 10's Host check: the bytes
// httpguts.ValidHostHeader accepts and no other; an IPv6 zone is dropped,
// as net/http drops it.
func TestH1HostValidation(t *testing.T) {
	hosts := make(chan string, 8)
	var requests atomic.Int32
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		hosts <- r.Host
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, nil)
	for _, bad := range []string{"a b", "a\tb", "a\x7fb", "a/b", "a\"b", "a{b}", "a\\b", "é.example", "a@b", "a?b", "a#b", "a<b>"} {
		r := postTo(t, t.Context(), u, "{}")
		r.Host = bad
		if resp, err := h1.RoundTrip(r); err == nil {
			resp.Body.Close()
			t.Errorf("Host %q was sent", bad)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests with an invalid Host reached the upstream", n)
	}
	for host, want := range map[string]string{
		"mcp.example:8080":      "mcp.example:8080",
		"[::1]:8080":            "[::1]:8080",
		"[fe80::1%en0]:8080":    "[fe80::1]:8080",
		"a-b_c.~!$&'()*+,;=":    "a-b_c.~!$&'()*+,;=",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
	} {
		r := postTo(t, t.Context(), u, "{}")
		r.Host = host
		roundTrip(t, h1, r)
		if got := wait(t, hosts, "request"); got != want {
			t.Errorf("Host %q reached the upstream as %q, want %q", host, got, want)
		}
	}
}

// TestH1ZeroLengthBody pins item 10's "ContentLength == 0 with a body
// sends no body silently": such a body is one of unknown length to
// net/http, sent as it is.
func TestH1ZeroLengthBody(t *testing.T) {
	bodies := make(chan string, 1)
	srv, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, http.DefaultTransport.(*http.Transport).Clone())
	r := postTo(t, t.Context(), u, `{"jsonrpc":"2.0"}`)
	r.ContentLength = 0
	roundTrip(t, h1, r)
	if got := wait(t, bodies, "request"); got != `{"jsonrpc":"2.0"}` {
		t.Fatalf("the upstream read %q", got)
	}
}

// TestH1DialAddr pins item 10's "http://host:/mcp dials port 0": an
// empty port is port 80, as net/http dials it.
func TestH1DialAddr(t *testing.T) {
	for host, want := range map[string]string{
		"mcp.example":      "mcp.example:80",
		"mcp.example:":     "mcp.example:80",
		"mcp.example:8080": "mcp.example:8080",
		"[::1]":            "[::1]:80",
		"[::1]:":           "[::1]:80",
		"[::1]:3000":       "[::1]:3000",
		"127.0.0.1:":       "127.0.0.1:80",
	} {
		if got := newH1Transport(host, nil, nil, 1).addr; got != want {
			t.Errorf("host %q dials %q, want %q", host, got, want)
		}
	}
}

// TestH1RefusedBytes pins the mutants "DEL (0x7f) in a header value" and
// "a space or DEL in the request URI": each alone is refused before
// anything is written, and the connection serves the next request.
func TestH1RefusedBytes(t *testing.T) {
	var requests atomic.Int32
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	h1, u := testH1(t, srv.URL, nil)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	for name, bad := range map[string]func(*http.Request){
		"DEL in a header value": func(r *http.Request) { r.Header["X-Bad"] = []string{"a\x7fb"} },
		"DEL in a header name":  func(r *http.Request) { r.Header["X-Bad\x7f"] = []string{"v"} },
		"space in the URI":      func(r *http.Request) { r.URL.RawQuery = "a b" },
		"DEL in the URI":        func(r *http.Request) { r.URL.RawQuery = "a\x7fb" },
		"tab in the URI":        func(r *http.Request) { r.URL.RawQuery = "a\tb" },
	} {
		r := postTo(t, t.Context(), u, "{}")
		bad(r)
		if resp, err := h1.RoundTrip(r); err == nil {
			resp.Body.Close()
			t.Errorf("%s: sent", name)
		}
	}
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	if n, c := requests.Load(), conns.Load(); n != 2 || c != 1 {
		t.Fatalf("the upstream got %d requests on %d connections, want 2 on 1", n, c)
	}
}
