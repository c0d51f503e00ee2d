//go:build unix && !linux

package stdio

import (
	"syscall"
	"testing"
	"time"
)

// assertReaped needs /proc; elsewhere Done closing is the only check.
func assertReaped(*testing.T, int) {}

// waitGone waits until kill(pid, 0) says there is no such process.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for syscall.Kill(pid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
