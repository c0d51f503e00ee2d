package runner

import (
	"net"
	"syscall"
)

// peerSupported reports whether peerUID can tell a peer's uid here.
const peerSupported = true

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
