package base

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"
)

// App holds the process's I/O so commands are testable without globals.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Environ lists the process's environment (mrtr runner refuses any
	// MRTR_* variable in it); nil means os.Environ.
	Environ func() []string
	// BuildInfo reads the binary's build information; nil means
	// debug.ReadBuildInfo.
	BuildInfo func() (*debug.BuildInfo, bool)
	AfterFunc AfterFunc // the timer of mrtr call's --timeout; nil: time.AfterFunc
	// ProbeTimeout bounds mrtr proxy's era probe of a command upstream;
	// zero: 90 s (a test seam).
	ProbeTimeout time.Duration
	// Drain is closed by the first SIGTERM or SIGINT: serve and proxy
	// drain, every other command stops (the ctx of run ends then for
	// them). The ctx of run ends at the second signal. Nil: never (tests
	// stop a command by ending its ctx).
	Drain <-chan struct{}
}

// UntilDrain is ctx ended by the first signal too (a.Drain): what does
// not drain stops at once.
func (a *App) UntilDrain(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if a.Drain != nil {
		go func() {
			select {
			case <-a.Drain:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// ErrUsage marks an error already explained by a usage message.
var ErrUsage = errors.New("usage")

// ErrInterrupted ends a command the user interrupted (Ctrl-C); it exits
// with exitInterrupted.
var ErrInterrupted = errors.New("interrupted")

// exitInterrupted is the status of a command ended by SIGINT, as shells
// report one: 128 + 2.
const exitInterrupted = 130

// isFlagError reports whether err is a bad flag value (*flagError).
func isFlagError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe)
}

// NewFlagSet returns a flag set whose usage goes to its output, a.stderr
// (a usage error); --help prints it to a.stdout instead (see a.parse).
func (a *App) NewFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n", synopsis)
		PrintDefaults(fs)
	}
	return fs
}

// Parse parses flags, allowing them before and after positional arguments,
// and returns the positional ones (those after a -- too). --help prints
// the usage to a.stdout.
func (a *App) Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, rest, err := parseArgs(fs, args, a.Stdout)
	return append(pos, rest...), Explain(fs.Output(), err)
}

// flagError is a bad flag value; env names the environment variable when
// the value came from there.
type flagError struct {
	name, msg string
	env       string
}

func (e *flagError) Error() string {
	if e.env != "" {
		return "$" + e.env + " (--" + e.name + "): " + e.msg
	}
	return "--" + e.name + ": " + e.msg
}

func FlagErr(name, format string, args ...any) error {
	return &flagError{name: name, msg: fmt.Sprintf(format, args...)}
}

func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, FlagErr("log-level", "%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// Version is the version the commands report: the server version serve
// gives clients, the client version of call and of the proxy, and that of
// traces. main sets it at start from the one a release build stamped
// (main.version), or from the build information; empty in tests.
var Version string

// Plural is n and word, with an s unless n is 1: "1 character", "2
// characters".
func Plural[N ~int | ~int64](n N, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// StopTimer is what idleTimer needs of the *time.Timer that
// time.AfterFunc returns.
type StopTimer interface {
	Stop() bool
	Reset(time.Duration) bool
}

// AfterFunc is time.AfterFunc's shape; tests pass one whose timer they
// fire by hand.
type AfterFunc func(time.Duration, func()) StopTimer
