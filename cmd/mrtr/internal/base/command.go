package base

import (
	"context"
	"errors"
	"flag"
	"fmt"
)

// A Command is one of mrtr's commands, run as mrtr NAME [ARG...]. Each
// lives in a package of its own under cmd/mrtr/internal and exposes its
// Command; main lists and dispatches them.
type Command struct {
	// Name is the word after mrtr.
	Name string
	// Run runs the command with the words after its name. Its error is
	// reported by Exit.
	Run func(ctx context.Context, a *App, args []string) error
	// Drains says that Run stops on a's Drain itself (serve, proxy and
	// runner drain first); for every other command ctx ends at the first
	// SIGTERM or SIGINT too (App.UntilDrain).
	Drains bool
}

// Dispatch runs the command among cmds that args[0] names with the words
// after it, and returns its exit status (Exit); ok is false when no
// command has that name. A command that does not drain (Command.Drains)
// stops at the first signal too.
func Dispatch(ctx context.Context, a *App, cmds []*Command, args []string) (status int, ok bool) {
	for _, cmd := range cmds {
		if len(args) == 0 || cmd.Name != args[0] {
			continue
		}
		if !cmd.Drains {
			var cancel context.CancelFunc
			ctx, cancel = a.UntilDrain(ctx)
			defer cancel()
		}
		return a.Exit(cmd.Name, cmd.Run(ctx, a, args[1:])), true
	}
	return 0, false
}

// Exit reports err, the error of command name, on a's stderr (unless it
// was reported already) and returns the exit status it means: 0 for none
// or --help, 2 for a usage error or a bad flag value, exitInterrupted for
// ErrInterrupted, the status an error carries itself (mrtr probe's
// outcome, see ExitStatus), else 1.
func (a *App) Exit(name string, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	case errors.Is(err, ErrInterrupted):
		fmt.Fprintf(a.Stderr, "mrtr %s: %v\n", name, err)
		return exitInterrupted
	case isFlagError(err):
		// A bad or missing flag value, from the command line or the
		// environment, found by the flag package or by a check: a usage
		// error like an unknown flag.
		fmt.Fprintf(a.Stderr, "mrtr %s: %v\n%s", name, err, helpHint(name))
		return 2
	case exitStatus(err) != 0:
		return exitStatus(err)
	default:
		fmt.Fprintf(a.Stderr, "mrtr %s: %v\n", name, err)
		return 1
	}
}

// ExitStatus is an error that says itself with which status the command
// exits, having reported what it means already (mrtr probe's outcome).
type ExitStatus interface {
	error
	ExitStatus() int
}

// exitStatus is the status err carries (ExitStatus), else 0.
func exitStatus(err error) int {
	var s ExitStatus
	if errors.As(err, &s) {
		return s.ExitStatus()
	}
	return 0
}
