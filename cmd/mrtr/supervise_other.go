//go:build !linux

package main

import (
	"fmt"
	"io"
)

// superviseArgv is nil outside Linux: without a parent-death signal the
// supervisor could not learn of the proxy's death, so the command is
// started directly (stdio ignores Config.Supervisor there anyway).
func superviseArgv() []string { return nil }

// supervise is not available outside Linux.
func supervise(_ []string, _ []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mrtr: "+superviseArg+": only on Linux")
	return 2
}
