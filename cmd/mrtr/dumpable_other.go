//go:build !linux

package main

// undumpable does nothing outside Linux: there is no /proc/PID/environ
// to protect the same way (see SECURITY.md for what covers the key ring
// there: --upstream-user).
func undumpable() error { return nil }

// dumpable reports true: outside Linux the flag is not changed.
func dumpable() (bool, error) { return true, nil }
