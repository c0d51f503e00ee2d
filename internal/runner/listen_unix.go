//go:build unix

package runner

import (
	"net"
	"syscall"
)

// listenPrivate listens at path, the socket created with no permission
// for anyone but its owner (umask 0177 while it is created).
func listenPrivate(path string) (*net.UnixListener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}
