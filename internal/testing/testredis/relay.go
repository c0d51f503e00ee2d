package testredis

import (
	"net"
	"sync"
	"testing"
)

// relay is what the test links share: a listener on 127.0.0.1, a dial to
// the target for every connection accepted, and the bookkeeping that
// closes them all. pump moves the bytes of one accepted pair, in goroutines
// it starts with wg.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // guards conns, and the link's own state
	conns []net.Conn
	wg    sync.WaitGroup
}

// listen starts serving a relay to target with pump, and closes it when
// the test ends.
func (r *relay) listen(t testing.TB, target string, pump func(down, up net.Conn)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ln, r.target = ln, target
	r.wg.Go(func() { r.serve(pump) })
	t.Cleanup(r.Close)
}

// Addr is the proxy's host:port; clients connect there instead of target.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// Close stops the proxy and closes its connections.
func (r *relay) Close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) serve(pump func(down, up net.Conn)) {
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, down, up)
		r.mu.Unlock()
		pump(down, up)
	}
}
