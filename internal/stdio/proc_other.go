//go:build !unix

package stdio

import (
	"errors"
	"os/exec"
	"syscall"
)

// supported is false: Start returns an error wrapping errors.ErrUnsupported.
const supported = false

// supervisorSupported is false: Config.Supervisor is ignored.
const supervisorSupported = false

func sysProcAttr(*int, *User, bool) *syscall.SysProcAttr { return nil }

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

func endCmd() {}

func waitExited(int, int) bool { return false }

func signalSupervisor(int) bool { return false }

func signalGroup(int, bool) {}

func readFD(uintptr, []byte) (int, bool, error) { return 0, false, errors.ErrUnsupported }
