//go:build unix && !linux

package stdio

import "syscall"

const supported = true

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id). There is no Pdeathsig outside Linux.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExited cannot wait without reaping here: the caller falls back to
// exec.Cmd.Wait alone.
func waitExited(int) bool { return false }

// signalGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
