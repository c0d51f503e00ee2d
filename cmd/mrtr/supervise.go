package main

import (
	"os"
	"syscall"
)

// superviseArg is the hidden first argument that makes mrtr the supervisor
// of a stdio upstream command (see supervise), dispatched by main before
// any flag parsing. It is not a command a user runs: without the
// variable stdio.SupervisorParentVar, and unless it leads its own process
// group, it refuses to run.
const superviseArg = "__supervise"

// superviseIfAsked runs the supervisor mode, or the probe of its PID
// namespace (probeArg, see confinement), and exits when args (os.Args)
// ask for it; otherwise it returns. main calls it first (and the tests'
// TestMain, as their binary is the supervisor of the commands the tests
// run as upstreams).
//
// It exits with syscall.Exit, not os.Exit: nothing of the runtime's exit
// is wanted, and under the race detector os.Exit sleeps a second in a
// process that ever ran more than one thread (GORACE atexit_sleep_ms),
// which every child's stop then waited for.
func superviseIfAsked(args []string) {
	if len(args) > 1 && args[1] == superviseArg {
		syscall.Exit(supervise(args[2:], os.Environ(), os.Stderr))
	}
	if len(args) == 2 && args[1] == probeArg {
		syscall.Exit(probeConfinement(os.Stderr))
	}
}
