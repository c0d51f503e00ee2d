package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests of this file pin the h1.go survivors of issue 35's mutation
// audit, each seen failing on its mutant.

// errCutWrite is cutConn's write error.
var errCutWrite = errors.New("test: write cut short")

// cutConn is a connection connAlive can peek at whose Write, once armed,
// sends only the first cut bytes of what it is given and fails (the
// kernel taking part of a request before the connection broke); with
// shut, it also shuts its sending side, so the upstream sees the request
// end there.
type cutConn struct {
	*net.TCPConn
	armed *atomic.Bool
	cut   int
	shut  bool
}

func (c cutConn) SyscallConn() (syscall.RawConn, error) { return c.TCPConn.SyscallConn() }

func (c cutConn) Write(p []byte) (int, error) {
	if !c.armed.Load() {
		return c.TCPConn.Write(p)
	}
	n, err := c.TCPConn.Write(p[:min(c.cut, len(p))])
	if c.shut {
		_ = c.TCPConn.CloseWrite()
	}
	if err == nil {
		err = errCutWrite
	}
	return n, err
}

// cutDial dials connections that cut their writes once armed is set,
// counting the dials.
func cutDial(armed *atomic.Bool, cut int, shut bool, dials *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return cutConn{TCPConn: c.(*net.TCPConn), armed: armed, cut: cut, shut: shut}, nil
	}
}

// okServer answers every request it reads whole with "ok" and keeps the
// connection until the client closes it (or the test ends).
func okServer(t *testing.T) string {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
}

// TestH1PartialWriteNotResent pins the mutants ":235 a partial write taken
// as nothing written" and ":249 the write error lost when the read fails
// too": a request of which part reached the upstream on a reused
// connection is never sent again (the upstream may run what it read), and
// the call's error is the write's, not the read's that followed.
func TestH1PartialWriteNotResent(t *testing.T) {
	armed, dials := new(atomic.Bool), new(atomic.Int32)
	h1, u := testH1(t, okServer(t), nil)
	h1.dial = cutDial(armed, 10, true, dials)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}")) // the connection is kept
	armed.Store(true)
	resp, err := h1.RoundTrip(postTo(t, t.Context(), u, "{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a request cut short on a reused connection succeeded (on %d connections): it was sent again", dials.Load())
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials: a request cut short was sent again on a new connection", n)
	}
	if !errors.Is(err, errCutWrite) {
		t.Errorf("error %v: want the write's (%v)", err, errCutWrite)
	}
}

// TestH1FailedWriteNotKept pins the mutant ":254 a connection kept after a
// failed write": an upstream that answers before it read all of a body
// (an early 413) and keeps the connection gets an answer through, but the
// connection, whose request went out cut short, is never used again.
func TestH1FailedWriteNotKept(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	url := serveConns(t, "/mcp", func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// The header was read, the body is not: answered at once.
		if _, err := io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 3\r\n\r\nbig"); err != nil {
			return
		}
		<-stop // and kept open
	})
	armed, dials := new(atomic.Bool), new(atomic.Int32)
	armed.Store(true)
	h1, u := testH1(t, url, nil)
	h1.dial = cutDial(armed, 200, false, dials)
	resp, body := roundTrip(t, h1, postTo(t, t.Context(), u, strings.Repeat("x", 4096)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || body != "big" {
		t.Fatalf("got %d %q, want the early 413", resp.StatusCode, body)
	}
	h1.mu.Lock()
	n := len(h1.idle)
	h1.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d idle connections after a failed write, want 0", n)
	}
}

// TestH1UncheckedNeverPooled pins the mutant ":446 unchecked connections
// pooled": a connection connAlive cannot peek at (here one end of a
// net.Pipe) whose request was refused before any byte left is closed, not
// kept for the next request.
func TestH1UncheckedNeverPooled(t *testing.T) {
	var mu sync.Mutex
	var ends []net.Conn
	h1, u := testH1(t, "http://upstream.invalid/mcp", nil)
	h1.dial = func(context.Context, string, string) (net.Conn, error) {
		c, s := net.Pipe()
		mu.Lock()
		ends = append(ends, s)
		mu.Unlock()
		return c, nil
	}
	r := postTo(t, t.Context(), u, "{}")
	r.Header["X-Bad"] = []string{"a\x7fb"} // refused before anything is written
	if resp, err := h1.RoundTrip(r); err == nil {
		resp.Body.Close()
		t.Fatal("a request with an invalid header value was sent")
	}
	h1.mu.Lock()
	n := len(h1.idle)
	h1.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d unchecked connections kept idle, want 0", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 1 {
		t.Fatalf("%d dials, want 1", len(ends))
	}
	_ = ends[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ends[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the unchecked connection was not closed: read %v", err)
	}
}

// TestH1ExpireRechecks pins the mutant ":472 expire does not recheck idle
// time": an idle timer that fires for a connection that was taken and put
// back since (idle for less than idleTimeout) leaves it open and kept.
func TestH1ExpireRechecks(t *testing.T) {
	h1, u := testH1(t, okServer(t), nil)
	roundTrip(t, h1, postTo(t, t.Context(), u, "{}"))
	h1.mu.Lock()
	if len(h1.idle) != 1 {
		h1.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(h1.idle))
	}
	cn := h1.idle[0]
	h1.mu.Unlock()
	h1.expire(cn) // a stale timer: cn went idle just now
	h1.mu.Lock()
	n := len(h1.idle)
	h1.mu.Unlock()
	if n != 1 {
		t.Fatalf("a connection idle for less than idleTimeout was expired")
	}
	if resp, body := roundTrip(t, h1, postTo(t, t.Context(), u, "{}")); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// One idle for longer is.
	h1.mu.Lock()
	cn = h1.idle[0]
	cn.used = time.Now().Add(-h1.idleTimeout)
	h1.mu.Unlock()
	h1.expire(cn)
	h1.mu.Lock()
	n = len(h1.idle)
	h1.mu.Unlock()
	if n != 0 {
		t.Fatalf("a connection idle for idleTimeout was kept")
	}
}

// TestH1IdleTimeout pins the mutant ":139 idle timeout changed": idle
// connections are kept as long as *http.Transport keeps them (90 s, the
// Options documentation's figure).
func TestH1IdleTimeout(t *testing.T) {
	want := http.DefaultTransport.(*http.Transport).IdleConnTimeout
	if got := newH1Transport("h", nil, nil, 1).idleTimeout; got != want || got != 90*time.Second {
		t.Fatalf("idle timeout %v, want %v (90s)", got, want)
	}
}

// TestH1BodyLimit pins the mutant ":113 body limit raised to 1 MiB": a
// body of up to 256 KiB goes out on h1's own connection, a larger one
// through next (which reads while it writes, and so hears an early answer
// of a server that stops reading).
func TestH1BodyLimit(t *testing.T) {
	var nexted atomic.Int32
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		nexted.Add(1)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("next")), Request: r}, nil
	})
	h1, u := testH1(t, okServer(t), next)
	if _, body := roundTrip(t, h1, postTo(t, t.Context(), u, strings.Repeat("x", 256<<10))); body != "ok" || nexted.Load() != 0 {
		t.Fatalf("a body of 256 KiB: %q, %d through next; want h1's own", body, nexted.Load())
	}
	if _, body := roundTrip(t, h1, postTo(t, t.Context(), u, strings.Repeat("x", 256<<10+1))); body != "next" || nexted.Load() != 1 {
		t.Fatalf("a body of 256 KiB + 1: %q; want it through next", body)
	}
}
