//go:build unix

package testredis

import (
	"os"
	"syscall"
)

var (
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
)

// terminate asks p to shut down.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
