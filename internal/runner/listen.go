package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// SocketMode is the mode of the socket Listen creates: the runner's own
// uid (refused as a peer anyway) and the socket's group may connect.
const SocketMode fs.FileMode = 0o660

// ErrNotSocket is Listen's error for a path that exists and is not a
// socket: the runner never removes anything else.
var ErrNotSocket = errors.New("runner: the path exists and is not a socket")

// ErrInUse is Listen's error for a socket another process listens at.
var ErrInUse = errors.New("runner: another process listens at the socket")

// Listen creates the Unix socket at path, mode SocketMode, its group gid
// (-1: the process's own), and listens on it. A socket file nobody
// listens at (a runner that was killed) is removed first; anything else
// at path is refused (ErrNotSocket, ErrInUse). The socket is created
// with no permission for anyone but its owner, then given its group and
// its mode: no peer of another group can connect meanwhile. Closing the
// listener removes the file.
func Listen(path string, gid int) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("runner: listen at %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("runner: give the socket %s group %d: %w", path, gid, err)
		}
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner: chmod %o the socket %s: %w", SocketMode, path, err)
	}
	return ln, nil
}

// removeStale removes the socket at path when nothing listens there.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("runner: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%w: %s (%s)", ErrNotSocket, path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("runner: the socket %s: %w", path, err)
	}
	// Between the check and the remove another runner could take the
	// path; it would lose its socket file, not its secrets (it has none).
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("runner: remove the stale socket %s: %w", path, err)
	}
	return nil
}
