//go:build !linux

package runner

import (
	"errors"
	"net"
)

// peerSupported reports whether peerUID can tell a peer's uid here: only
// on Linux (SO_PEERCRED), so a Server refuses to run elsewhere.
const peerSupported = false

func peerUID(*net.UnixConn) (uint32, error) { return 0, errors.ErrUnsupported }
