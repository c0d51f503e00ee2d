//go:build !linux

package supervise

// Undumpable does nothing outside Linux: there is no /proc/PID/environ
// to protect the same way (see SECURITY.md for what covers the key ring
// there: --upstream-user).
func Undumpable() error { return nil }

// Dumpable reports true: outside Linux the flag is not changed.
func Dumpable() (bool, error) { return true, nil }
