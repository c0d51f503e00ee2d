//go:build !unix

package runner

import (
	"errors"
	"net"
)

// listenPrivate is not available without Unix permissions on sockets.
func listenPrivate(string) (*net.UnixListener, error) { return nil, errors.ErrUnsupported }
