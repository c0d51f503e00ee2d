//go:build !linux

package runner

import (
	"errors"
	"net"
)

// Supported reports whether a Server can run here: it must tell a
// peer's uid, which it does only on Linux (SO_PEERCRED).
const Supported = false

func peerUID(*net.UnixConn) (uint32, error) { return 0, errors.ErrUnsupported }
