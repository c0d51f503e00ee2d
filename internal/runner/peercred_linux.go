package runner

import (
	"net"
	"syscall"
)

// Supported reports whether a Server can run here: it must tell a
// peer's uid (SO_PEERCRED, Linux).
const Supported = true

// peerUID is the uid of the process that connected c, as the kernel
// recorded it at connect (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uint32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}
