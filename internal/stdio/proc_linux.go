package stdio

import (
	"syscall"
	"unsafe"
)

const supported = true

// sysProcAttr puts the child in a process group of its own (its pid is the
// group id) and has the kernel SIGKILL it when the thread that started it
// exits: run keeps that thread until the child is reaped, so in effect when
// the proxy dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pPID is P_PID of waitid(2).
const pPID = 1

// waitExited blocks until the child has exited, without reaping it (waitid
// with WNOWAIT, as os.Process.Wait does for the same reason), and reports
// whether it could.
func waitExited(pid int) bool {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}

// signalGroup sends SIGTERM, or SIGKILL, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
