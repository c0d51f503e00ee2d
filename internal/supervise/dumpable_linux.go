package supervise

import (
	"fmt"
	"syscall"
)

// Undumpable marks the process non-dumpable (prctl PR_SET_DUMPABLE 0), so
// that a process of the same user, an upstream command among them, can
// neither read its /proc/PID/environ (where $MRTR_KEYS is), mem or maps,
// nor ptrace it, and it leaves no core dump. Root, or anyone holding
// CAP_SYS_PTRACE, still can; a key file the user can read stays readable
// (--upstream-user covers both). It must run before the first child
// starts.
func Undumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("make the process non-dumpable: %w", errno)
	}
	return nil
}

// Dumpable reports the process's dumpable flag (prctl PR_GET_DUMPABLE).
func Dumpable() (bool, error) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("read the dumpable flag: %w", errno)
	}
	return r != 0, nil
}
