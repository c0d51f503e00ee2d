//go:build unix && !linux

package stdio

import (
	"os/exec"
	"syscall"
)

const supported = true

// supervisorSupported is false: without a parent-death signal a
// supervisor could not learn of the proxy's death; Config.Supervisor is
// ignored.
const supervisorSupported = false

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id), as u when set. There is no Pdeathsig outside Linux, and no
// pidfd: *pidfd is left -1.

func sysProcAttr(_ *int, u *User, _ bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: credential(u)}
}

// startCmd starts cmd: without Pdeathsig, any thread may fork.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// endCmd has nothing to release here.
func endCmd() {}

// waitExited cannot wait without reaping here: the caller falls back to
// exec.Cmd.Wait alone.
func waitExited(int, int) bool { return false }

// signalSupervisor is never called here (no supervisor is run).
func signalSupervisor(int) bool { return false }

// signalGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
