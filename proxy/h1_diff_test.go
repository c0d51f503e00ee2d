package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The differential harness of issue 27 item 11: one hostile upstream,
// scripted on raw TCP sockets, against *http.Transport and h1Transport in
// turn, the same requests in the same order. The lean transport must
// answer what the standard one answers, or fail where a case says it is
// stricter; and no request may ever receive bytes of another's reply.

// diffCase is a hostile upstream and the requests sent to it.
type diffCase struct {
	name     string
	requests int // 3 when zero
	// body is the size of each request's body; a small JSON body when 0.
	body int
	// mutate makes request n hostile on the caller's side.
	mutate func(n int, r *http.Request)
	// reply writes what the upstream sends for request n on c and reports
	// whether to keep serving c.
	reply func(n int, c net.Conn) bool
	// after, when set, runs once the client has read (or failed) request
	// n, before it sends n+1: what it writes reaches an idle connection.
	// It reports whether to keep serving c.
	after func(n int, c net.Conn) bool
	// unread: the upstream answers without reading the request's body.
	unread bool
	// leanStricter: the lean transport may fail a request the standard one
	// sends (it refuses bytes net/http lets through).
	leanStricter bool
	// stdRacy: the standard transport may fail a request the lean one
	// gets right: its reader goroutine may not yet have seen what reached
	// an idle connection (a close, stray bytes) when the next request
	// takes it, and then reads that as the answer.
	stdRacy bool
}

// marker is the body of the upstream's reply to request n.
func marker(n int) string { return fmt.Sprintf("reply-%d.", n) }

var markerRE = regexp.MustCompile(`reply-(\d+)\.`)

// ok200 is a well-framed reply to request n.
func ok200(n int) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(marker(n)), marker(n))
}

func chunked(n int) string {
	m := marker(n)
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(m), m)
}

// send returns a reply that writes what f builds for n, in pieces split at
// the given offsets (clamped), pausing between them, and keeps the
// connection.
func send(f func(n int) string, pause time.Duration, at ...int) func(int, net.Conn) bool {
	return func(n int, c net.Conn) bool {
		s, from := f(n), 0
		for _, i := range at {
			i = min(max(i, from), len(s))
			if _, err := io.WriteString(c, s[from:i]); err != nil {
				return false
			}
			from = i
			time.Sleep(pause)
		}
		_, err := io.WriteString(c, s[from:])
		return err == nil
	}
}

// raw is a reply of fixed bytes (%d is n) that keeps the connection.
func raw(format string) func(int, net.Conn) bool {
	return func(n int, c net.Conn) bool {
		s := format
		if strings.Contains(s, "%") {
			s = fmt.Sprintf(format, n)
		}
		_, err := io.WriteString(c, s)
		return err == nil
	}
}

// closing is a reply of fixed bytes after which the upstream closes.
func closing(format string) func(int, net.Conn) bool {
	r := raw(format)
	return func(n int, c net.Conn) bool { r(n, c); return false }
}

// onRequest answers request at with bad and every other with ok200.
func onRequest(at int, bad func(int, net.Conn) bool) func(int, net.Conn) bool {
	return func(n int, c net.Conn) bool {
		if n == at {
			return bad(n, c)
		}
		return raw(ok200(n))(n, c)
	}
}

func diffCases() []diffCase {
	okReply := func(n int) string { return ok200(n) }
	return []diffCase{
		{name: "keep-alive", reply: send(okReply, 0)},
		{name: "status line split", reply: send(okReply, time.Millisecond, 4, 9)},
		{name: "header and body split", reply: send(okReply, time.Millisecond, 20, 36, 41)},
		{name: "byte at a time", reply: func(n int, c net.Conn) bool {
			for _, b := range []byte(ok200(n)) {
				if _, err := c.Write([]byte{b}); err != nil {
					return false
				}
			}
			return true
		}},
		{name: "chunked", reply: send(chunked, 0)},
		{name: "chunked split", reply: send(chunked, time.Millisecond, 10, 47, 52, 60)},
		{name: "chunk extension and trailer", reply: raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n4;ext=1\r\nrepl\r\n5\r\ny-%d.\r\n0\r\nX-T: t\r\n\r\n")},
		{name: "chunk size not hex", reply: onRequest(1, closing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nreply-%d.\r\n0\r\n\r\n"))},
		{name: "chunk size overflow", reply: onRequest(1, closing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nreply-%d.\r\n0\r\n\r\n"))},
		{name: "chunked, no last chunk, close", reply: onRequest(1, closing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nreply-%d.\r\n"))},
		{name: "chunked and Content-Length", reply: raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nreply-%d.\r\n0\r\n\r\n")},
		{name: "chunked then a stale reply", reply: func(n int, c net.Conn) bool { return raw(chunked(n)+ok200(n))(n, c) }},
		{name: "stale reply in the same write", reply: func(n int, c net.Conn) bool { return raw(ok200(n)+ok200(n))(n, c) }},
		{name: "stale reply once idle", reply: send(okReply, 0), after: func(n int, c net.Conn) bool { return raw(ok200(n))(n, c) }, stdRacy: true},
		{name: "garbage once idle", reply: send(okReply, 0), after: func(n int, c net.Conn) bool { return raw("garbage\r\n\r\n")(n, c) }, stdRacy: true},
		{name: "204 with a body", reply: func(n int, c net.Conn) bool {
			return raw("HTTP/1.1 204 No Content\r\nContent-Length: 8\r\n\r\n"+ok200(n))(n, c)
		}},
		{name: "304 with a body", reply: func(n int, c net.Conn) bool {
			return raw("HTTP/1.1 304 Not Modified\r\n\r\n"+ok200(n))(n, c)
		}},
		{name: "Content-Length short", reply: raw("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nreply-%d.HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"), stdRacy: true},
		{name: "Content-Length long, close", reply: onRequest(1, closing("HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nreply-%d."))},
		{name: "two Content-Lengths", reply: onRequest(1, raw("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Length: 9\r\n\r\nreply-%d."))},
		{name: "Content-Length not a number", reply: onRequest(1, raw("HTTP/1.1 200 OK\r\nContent-Length: 8x\r\n\r\nreply-%d."))},
		{name: "Content-Length negative", reply: onRequest(1, raw("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nreply-%d."))},
		{name: "Content-Length with a sign", reply: onRequest(1, raw("HTTP/1.1 200 OK\r\nContent-Length: +8\r\n\r\nreply-%d."))},
		{name: "no framing, close", reply: closing("HTTP/1.1 200 OK\r\n\r\nreply-%d.")},
		{name: "HTTP/1.0 keep-alive", reply: raw("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "HTTP/1.0 no keep-alive", reply: raw("HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "Connection: close, kept open", reply: raw("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "1xx flood", reply: func(n int, c net.Conn) bool {
			return raw(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 50)+ok200(n))(n, c)
		}},
		{name: "100 continue unasked", reply: func(n int, c net.Conn) bool { return raw("HTTP/1.1 100 Continue\r\n\r\n"+ok200(n))(n, c) }},
		{name: "101 unasked", reply: onRequest(1, raw("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")), leanStricter: true},
		{name: "1xx then close", reply: onRequest(1, closing("HTTP/1.1 103 Early Hints\r\n\r\n"))},
		{name: "DEL in a header value", reply: raw("HTTP/1.1 200 OK\r\nX-Bad: a\x7fb\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "CTL in a header value", reply: raw("HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "NUL in a header value", reply: raw("HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "bare CR in a header value", reply: raw("HTTP/1.1 200 OK\r\nX-Bad: a\rContent-Length: 3\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "space before the colon", reply: raw("HTTP/1.1 200 OK\r\nContent-Length : 3\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "DEL in a header name", reply: raw("HTTP/1.1 200 OK\r\nX-B\x7fd: v\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "obs-fold", reply: raw("HTTP/1.1 200 OK\r\nX-Bad: a\r\n b\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "bare LF", reply: raw("HTTP/1.1 200 OK\nContent-Length: 8\n\nreply-%d.")},
		{name: "NUL in the status line", reply: onRequest(1, raw("HTTP/1.1 200 O\x00K\r\nContent-Length: 8\r\n\r\nreply-%d."))},
		{name: "status 999", reply: raw("HTTP/1.1 999 What\r\nContent-Length: 8\r\n\r\nreply-%d.")},
		{name: "status 2-digit", reply: onRequest(1, raw("HTTP/1.1 20 OK\r\nContent-Length: 8\r\n\r\nreply-%d."))},
		{name: "HTTP/2 status line", reply: onRequest(1, raw("HTTP/2 200 OK\r\nContent-Length: 8\r\n\r\nreply-%d."))},
		{name: "header too large", reply: onRequest(1, func(n int, c net.Conn) bool {
			raw("HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("b", h1MaxHeaderBytes+1)+"\r\nContent-Length: 0\r\n\r\n")(n, c)
			return false
		})},
		{name: "close before a reply", reply: onRequest(1, closing(""))},
		{name: "close in the header", reply: onRequest(1, closing("HTTP/1.1 200 OK\r\nContent-Le"))},
		{name: "idle close", reply: send(okReply, 0), after: func(int, net.Conn) bool { return false }, stdRacy: true},
		{name: "idle reset", reply: send(okReply, 0), after: func(_ int, c net.Conn) bool {
			_ = c.(*net.TCPConn).SetLinger(0)
			return false
		}, stdRacy: true},
		{name: "DEL in a request header", reply: send(okReply, 0), mutate: func(n int, r *http.Request) {
			if n == 1 {
				r.Header.Set("X-Bad", "a\x7fb")
			}
		}},
		{name: "CRLF in a request header", reply: send(okReply, 0), mutate: func(n int, r *http.Request) {
			if n == 1 {
				r.Header["X-Bad"] = []string{"a\r\nX-Injected: 1"}
			}
		}},
		{name: "space in the request URI", reply: send(okReply, 0), leanStricter: true, mutate: func(n int, r *http.Request) {
			if n == 1 {
				r.URL.RawQuery = "a b"
			}
		}},
		{name: "DEL in the request URI", reply: send(okReply, 0), mutate: func(n int, r *http.Request) {
			if n == 1 {
				r.URL.RawQuery = "a\x7fb"
			}
		}},
		{name: "slash in Host", reply: send(okReply, 0), leanStricter: true, mutate: func(n int, r *http.Request) {
			if n == 1 {
				r.Host = "a/b"
			}
		}},
		{name: "zero ContentLength with a body", reply: send(okReply, 0), mutate: func(n int, r *http.Request) {
			r.ContentLength = 0
		}},
		{name: "large body read", body: 1 << 20, reply: send(okReply, 0)},
		// The upstream answers before it reads the body, then neither reads
		// nor closes until the client is done.
		{name: "large body, early 413", body: 8 << 20, unread: true,
			reply: raw("HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\nreply-%d."),
			after: func(int, net.Conn) bool { return false }},
		{name: "body at the lean limit, early 413", body: h1MaxBody, unread: true,
			reply: raw("HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\nreply-%d."),
			after: func(int, net.Conn) bool { return false }},
		{name: "small body, early 400, body drained", body: 64 << 10, unread: true, reply: func(n int, c net.Conn) bool {
			raw("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 8\r\n\r\nreply-%d.")(n, c)
			_, _ = io.Copy(io.Discard, c) // until the client closes: nothing is reset
			return false
		}},
	}
}

// outcome is what one request got, and what the upstream read of it.
type outcome struct {
	err    string // empty: a response, read to its end
	status int
	body   string
	read   string // the request as the upstream read it; empty: never
}

func (o outcome) String() string {
	if o.err != "" {
		return "error " + o.err
	}
	return fmt.Sprintf("%d %q", o.status, o.body)
}

// runDiff sends the case's requests in turn through rt to a fresh
// upstream running the case's script, and returns what each got.
func runDiff(t *testing.T, cs diffCase, rt http.RoundTripper) []outcome {
	t.Helper()
	n := cs.requests
	if n == 0 {
		n = 3
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	read, settled := make([]chan struct{}, n), make([]chan struct{}, n)
	seen := make([]atomic.Bool, n)
	got := make([]atomic.Pointer[string], n)
	for i := range n {
		read[i], settled[i] = make(chan struct{}), make(chan struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	defer func() {
		cancel()
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serveDiff(ctx, cs, c, read, settled, seen, got) })
		}
	})
	url := "http://" + ln.Addr().String() + "/mcp"
	out := make([]outcome, n)
	for i := range n {
		out[i] = diffRequest(t, cs, rt, url, i)
		close(read[i])
		if seen[i].Load() {
			select {
			case <-settled[i]:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the upstream did not settle request %d in 10s", cs.name, i)
			}
		}
	}
	for i := range out {
		if p := got[i].Load(); p != nil {
			out[i].read = *p
		}
	}
	return out
}

func serveDiff(ctx context.Context, cs diffCase, c net.Conn, read, settled []chan struct{}, seen []atomic.Bool, got []atomic.Pointer[string]) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		n, err := strconv.Atoi(r.Header.Get("X-N"))
		if err != nil || n < 0 || n >= len(read) {
			return
		}
		body := "unread"
		if !cs.unread {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			body = fmt.Sprintf("%d bytes %x", len(b), sha256.Sum256(b))
		}
		host := r.Host // each run listens on a port of its own
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		what := fmt.Sprintf("%s %s Host %q, body %.24s", r.Method, r.RequestURI, host, body)
		got[n].Store(&what)
		seen[n].Store(true)
		keep := cs.reply(n, c)
		if keep && cs.after != nil {
			select {
			case <-read[n]:
			case <-ctx.Done():
				return
			}
			keep = cs.after(n, c)
		}
		if !keep {
			c.Close()
		}
		close(settled[n])
		if !keep {
			return
		}
	}
}

func diffRequest(t *testing.T, cs diffCase, rt http.RoundTripper, url string, n int) outcome {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"n":%d}`, n)
	if cs.body > 0 {
		body = strings.Repeat("x", cs.body)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-N", strconv.Itoa(n))
	if cs.mutate != nil {
		cs.mutate(n, r)
	}
	resp, err := rt.RoundTrip(r)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s: request %d hung: %v", cs.name, n, err)
		}
		return outcome{err: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return outcome{status: resp.StatusCode} // its body is the connection
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s: the body of request %d hung: %v", cs.name, n, err)
		}
		return outcome{err: "body: " + err.Error(), status: resp.StatusCode}
	}
	return outcome{status: resp.StatusCode, body: string(b)}
}

// crossTalk names the replies of other requests that the answer to
// request n carries.
func crossTalk(n int, o outcome) []string {
	var other []string
	for _, m := range markerRE.FindAllStringSubmatch(o.body, -1) {
		if m[1] != strconv.Itoa(n) {
			other = append(other, m[0])
		}
	}
	return other
}

// TestH1Differential pins issue 27 item 11(a): against each hostile
// upstream the lean transport answers every request as *http.Transport
// does (or, where a case says so, fails where net/http lets bytes
// through), and never hands a request another's reply.
func TestH1Differential(t *testing.T) {
	// *http.Transport logs each unsolicited response it drops to the
	// standard logger; the cases send many.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	for _, cs := range diffCases() {
		t.Run(cs.name, func(t *testing.T) {
			std := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}
			defer std.CloseIdleConnections()
			// The lean transport's own *http.Transport for what it does not
			// send itself (large bodies, unknown lengths).
			next := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}
			stdOut := runDiff(t, cs, std)
			std.CloseIdleConnections()
			// The lean transport twice: on sockets it peeks at, and on
			// connections it cannot check (as where the platform has no
			// peek), which it must never reuse.
			for _, variant := range []string{"lean", "lean, unchecked"} {
				var lean *h1Transport
				leanOut := runDiff(t, cs, roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if lean == nil {
						lean = newH1Transport(r.URL.Host, next, (&net.Dialer{}).DialContext, 4)
						if variant != "lean" {
							lean.dial = plainDial
						}
					}
					return lean.RoundTrip(r)
				}))
				if lean != nil {
					lean.CloseIdleConnections()
				}
				compareDiff(t, cs, variant, stdOut, leanOut)
			}
		})
	}
}

// compareDiff fails t where the lean transport's outcomes differ from the
// standard one's beyond what the case allows.
func compareDiff(t *testing.T, cs diffCase, variant string, stdOut, leanOut []outcome) {
	t.Helper()
	for i := range stdOut {
		s, l := stdOut[i], leanOut[i]
		if other := crossTalk(i, l); len(other) > 0 {
			t.Errorf("%s: request %d got %v of another request: %v", variant, i, other, l)
		}
		if other := crossTalk(i, s); len(other) > 0 {
			t.Logf("*http.Transport: request %d got %v of another request: %v", i, other, s)
		}
		if s.read != "" && l.read != "" && s.read != l.read {
			t.Errorf("%s: request %d reached the upstream as %s, through *http.Transport as %s", variant, i, l.read, s.read)
		}
		switch {
		case len(crossTalk(i, s)) > 0:
			// net/http's reader goroutine had not yet seen the stray
			// reply when the request took the idle connection.
		case s.err == "" && l.err == "":
			if s.status != l.status || s.body != l.body {
				t.Errorf("%s: request %d: std %v, lean %v", variant, i, s, l)
			}
		case s.err != "" && l.err != "":
		case l.err != "" && cs.leanStricter:
		case s.err != "" && cs.stdRacy:
			t.Logf("%s: request %d: std %v (its reader's race), lean %v", variant, i, s, l)
		default:
			t.Errorf("%s: request %d: std %v, lean %v", variant, i, s, l)
		}
	}
}
