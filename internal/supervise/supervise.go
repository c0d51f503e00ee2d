// Package supervise is mrtr's supervisor of a stdio upstream command: the
// process, started by internal/stdio in place of the command (with
// stdio.Config.Supervisor, Argv here), that leads the command's process
// group, is a child subreaper, runs it in a PID namespace of its own when
// the kernel allows, and kills the command and everything it started
// when the proxy dies. It is the same executable as the proxy, re-executed
// with a hidden first argument (Arg): the program's main calls Init first,
// before any flag parsing or signal handling, as moby's reexec.Init is
// called, and Init runs the supervisor and exits when the arguments ask
// for it.
//
// It also holds what keeps the proxy's own memory from its children:
// Undumpable, and Confinement, which says whether a command can be run in
// a PID namespace of its own.
package supervise

import (
	"os"
	"syscall"
)

// Arg is the hidden first argument that makes mrtr the supervisor of a
// stdio upstream command (see supervise), dispatched by Init before any
// flag parsing. It is not a command a user runs: without the variable
// stdio.SupervisorParentVar, and unless it leads its own process group,
// it refuses to run.
const Arg = "__supervise"

// Init runs the supervisor mode, or the probe of its PID namespace
// (probeArg, see Confinement), and exits when os.Args ask for it;
// otherwise it returns. main calls it first (and the tests' TestMain, as
// their binary is the supervisor of the commands the tests run as
// upstreams).
//
// It exits with syscall.Exit, not os.Exit: nothing of the runtime's exit
// is wanted, and under the race detector os.Exit sleeps a second in a
// process that ever ran more than one thread (GORACE atexit_sleep_ms),
// which every child's stop then waited for.
func Init() {
	args := os.Args
	if len(args) > 1 && args[1] == Arg {
		syscall.Exit(supervise(args[2:], os.Environ(), os.Stderr))
	}
	if len(args) == 2 && args[1] == probeArg {
		syscall.Exit(probeConfinement(os.Stderr))
	}
}
