package base

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// CommandName is how logs name a command upstream: its program, never its
// arguments (they may carry secrets).
func CommandName(cmd []string) string { return filepath.Base(cmd[0]) }

// CheckCommand refuses an upstream command that cannot be run (no such
// program on $PATH, or not executable), before anything else is said.
// No command (an HTTP upstream) passes.
func CheckCommand(command []string) error {
	if len(command) == 0 {
		return nil
	}
	if _, err := exec.LookPath(command[0]); err != nil {
		return fmt.Errorf("the upstream command after --: %w", err)
	}
	return nil
}
