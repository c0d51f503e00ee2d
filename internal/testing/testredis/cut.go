package testredis

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// CutLink is a TCP proxy on 127.0.0.1 to a server that loses one reply on
// request: after [CutLink.Cut], the server's reply to the next request that
// contains a marker is dropped and that connection is closed, both ways.
// The server got the request and ran it; the client sees its connection
// close before any reply, which is when go-redis sends the request again.
// It is closed when the test ends.
type CutLink struct {
	relay
	armed  chan struct{} // under mu; non-nil after Cut: closed when the reply is lost
	marker []byte
}

// StartCutLink starts a proxy to target that passes everything through
// until Cut.
func StartCutLink(t testing.TB, target string) *CutLink {
	t.Helper()
	l := &CutLink{}
	l.listen(t, target, l.pump)
	return l
}

// Cut makes the link lose the reply to the next request (what a client
// sent on one connection since the server last answered there) that
// contains marker, and returns a channel closed once it has.
func (l *CutLink) Cut(marker string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.marker = make(chan struct{}), []byte(marker)
	return l.armed
}

// pump passes one connection through, dropping the reply Cut armed.
func (l *CutLink) pump(down, up net.Conn) {
	var (
		mu   sync.Mutex
		sent []byte // what the client sent since the last reply
	)
	l.wg.Go(func() { // client to target, as it comes
		defer func() { _ = up.Close() }()
		buf := make([]byte, 32<<10)
		for {
			n, err := down.Read(buf)
			if n > 0 {
				mu.Lock()
				sent = append(sent, buf[:n]...)
				mu.Unlock()
				if _, err := up.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	l.wg.Go(func() {
		defer func() { _ = up.Close(); _ = down.Close() }()
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				mu.Lock()
				req := sent
				sent = nil
				mu.Unlock()
				if l.lose(req) {
					return
				}
				if _, err := down.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// lose reports whether the link was cut and the reply to req is the one
// lost, and disarms it if so.
func (l *CutLink) lose(req []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed == nil || !bytes.Contains(req, l.marker) {
		return false
	}
	close(l.armed)
	l.armed = nil
	return true
}
