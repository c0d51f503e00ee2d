//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"net"
	"syscall"
)

// LeanTransportSupported reports whether this platform can run the lean
// upstream transport (TransportLean): it can peek at a socket without
// blocking, the check that tells whether an idle connection may carry the
// next request.
const LeanTransportSupported = true

// connAlive tells whether the upstream has neither closed c nor sent
// anything on it unasked, with one non-blocking peek at its socket (the
// check *http.Transport's reader goroutine makes by waiting on every idle
// connection). A connection that is no socket it can peek at is
// connUnchecked.
func connAlive(c net.Conn) connState {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return connUnchecked
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return connUnchecked
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	if err != nil || !alive {
		return connDirty
	}
	return connIdle
}
