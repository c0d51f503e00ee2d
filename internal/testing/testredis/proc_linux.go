package testredis

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill redis-server if the test binary dies
// without running its cleanups (a test timeout, say), so no server outlives
// the tests that started it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
