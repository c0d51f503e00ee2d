package testredis

import (
	"io"
	"net"
	"testing"
	"time"
)

// LagLink is a TCP proxy on 127.0.0.1 that delivers what a server sends
// (target to client) lag late, and what the client sends at once: a
// replication link across a slow network. When the target goes away (a
// crash), whatever it sent in the last lag is dropped, never delivered, as
// when the primary's host dies with data still in its send queue or on the
// wire. It is closed when the test ends.
type LagLink struct {
	relay
	lag time.Duration
}

// StartLagLink starts a proxy to target whose target-to-client direction
// lags by lag.
func StartLagLink(t testing.TB, target string, lag time.Duration) *LagLink {
	t.Helper()
	l := &LagLink{lag: lag}
	l.listen(t, target, l.pump)
	return l
}

// Port is the proxy's port.
func (l *LagLink) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// pump passes one connection through, the target's side lagged.
func (l *LagLink) pump(down, up net.Conn) {
	l.wg.Go(func() { // client to target: no lag
		_, _ = io.Copy(up, down)
		_ = up.Close()
	})
	l.wg.Go(func() { l.lagged(up, down) })
}

// chunk is what the target sent, and when.
type chunk struct {
	data []byte
	at   time.Time
}

// lagged copies from up to down, each chunk lag after it was read. When up
// fails, chunks not yet delivered are dropped and down is closed.
func (l *LagLink) lagged(up, down net.Conn) {
	queue := make(chan chunk, 4096)
	dead := make(chan struct{}) // up failed
	stop := make(chan struct{}) // this writer is done
	l.wg.Go(func() {
		defer close(dead)
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{append([]byte(nil), buf[:n]...), time.Now()}:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		close(stop)
		_ = up.Close()
		_ = down.Close()
	}()
	for {
		select {
		case <-dead:
			return // the target is gone: what it sent lately is lost
		case c := <-queue:
			if wait := time.Until(c.at.Add(l.lag)); wait > 0 {
				select {
				case <-dead:
					return
				case <-time.After(wait):
				}
			}
			if _, err := down.Write(c.data); err != nil {
				return
			}
		}
	}
}
