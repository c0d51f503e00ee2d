//go:build unix

package stdio

import "syscall"

// readFD reads once from fd, retrying on EINTR; again reports EAGAIN (a
// non-blocking fd with no data yet).
func readFD(fd uintptr, p []byte) (n int, again bool, err error) {
	for {
		n, err = syscall.Read(int(fd), p)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EAGAIN {
		return 0, true, nil
	}
	return n, false, err
}
