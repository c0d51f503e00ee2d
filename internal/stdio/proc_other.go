//go:build !unix

package stdio

import "syscall"

// supported is false: Start returns an error wrapping errors.ErrUnsupported.
const supported = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func waitExited(int) bool { return false }

func signalGroup(int, bool) {}
