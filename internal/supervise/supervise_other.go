//go:build !linux

package supervise

import (
	"fmt"
	"io"

	"github.com/mrtr-go/mrtr/internal/stdio"
)

// Argv is nil outside Linux: without a parent-death signal the
// supervisor could not learn of the proxy's death, so the command is
// started directly (stdio ignores Config.Supervisor there anyway).
func Argv() []string { return nil }

// supervise is not available outside Linux.
func supervise(_ []string, _ []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "mrtr: "+Arg+": only on Linux")
	return 2
}

// probeArg is the hidden first argument of Confinement's probe.
const probeArg = "__supervise-probe"

// probeConfinement is not available outside Linux.
func probeConfinement(stderr io.Writer) int { return supervise(nil, nil, stderr) }

// Confinement is nil outside Linux: no command is supervised there, and
// the documentation says what its children can do.
func Confinement(*stdio.User) error { return nil }
