package e2e

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill a server if the test binary dies without
// running its cleanups (a test timeout, a closed output pipe), so no
// `mrtr serve` outlives the tests that started it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
