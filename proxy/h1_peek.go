//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"net"
	"syscall"
)

// connAlive reports whether the upstream has neither closed c nor sent
// anything on it unasked, with one non-blocking peek at its socket (the
// check *http.Transport's reader goroutine makes by waiting on every idle
// connection).
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
