//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

import "net"

// LeanTransportSupported reports whether this platform can run the lean
// upstream transport (TransportLean). Here it cannot: a socket cannot be
// peeked at without blocking, so an idle connection the upstream closed or
// sent stray bytes on would carry the next caller's request, and the
// stray bytes would become its response.
const LeanTransportSupported = false

// connAlive cannot peek at a socket here: every connection is
// connUnchecked, and none is ever kept idle.
func connAlive(net.Conn) connState { return connUnchecked }
