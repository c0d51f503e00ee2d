package main

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

// app holds the process's I/O so commands are testable without globals.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// environ lists the process's environment (mrtr runner refuses any
	// MRTR_* variable in it); nil means os.Environ.
	environ func() []string
	// buildInfo reads the binary's build information; nil means
	// debug.ReadBuildInfo.
	buildInfo func() (*debug.BuildInfo, bool)
	afterFunc afterFunc // the timer of mrtr call's --timeout; nil: time.AfterFunc
	// probeTimeout bounds mrtr proxy's era probe of a command upstream;
	// zero: 90 s (a test seam).
	probeTimeout time.Duration
	// drain is closed by the first SIGTERM or SIGINT: serve and proxy
	// drain, every other command stops (the ctx of run ends then for
	// them). The ctx of run ends at the second signal. Nil: never (tests
	// stop a command by ending its ctx).
	drain <-chan struct{}
}

// untilDrain is ctx ended by the first signal too (app.drain): what does
// not drain stops at once.
func (a *app) untilDrain(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if a.drain != nil {
		go func() {
			select {
			case <-a.drain:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// errUsage marks an error already explained by a usage message.
var errUsage = errors.New("usage")

// errInterrupted ends a command the user interrupted (Ctrl-C); it exits
// with exitInterrupted.
var errInterrupted = errors.New("interrupted")

// exitInterrupted is the status of a command ended by SIGINT, as shells
// report one: 128 + 2.
const exitInterrupted = 130

// isFlagError reports whether err is a bad flag value (*flagError).
func isFlagError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe)
}

// newFlagSet returns a flag set whose usage goes to its output, a.stderr
// (a usage error); --help prints it to a.stdout instead (see a.parse).
func (a *app) newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n", synopsis)
		printDefaults(fs)
	}
	return fs
}

// parse parses flags, allowing them before and after positional arguments,
// and returns the positional ones (those after a -- too). --help prints
// the usage to a.stdout.
func (a *app) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, rest, err := parseArgs(fs, args, a.stdout)
	return append(pos, rest...), explain(fs.Output(), err)
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

func flagErr(name, format string, args ...any) error {
	return &flagError{name: name, msg: fmt.Sprintf(format, args...)}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, flagErr("log-level", "%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// version is the server version reported to clients and printed by mrtr
// version. A variable, not a constant, so that a release build can stamp
// it: go build -ldflags "-X main.version=1.2.3" (.goreleaser.yaml and
// scripts/image.sh do); main fills in an unstamped one (resolveVersion).
var version string

// plural is n and word, with an s unless n is 1: "1 character", "2
// characters".
func plural[N ~int | ~int64](n N, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// stopTimer is what idleTimer needs of the *time.Timer that
// time.AfterFunc returns.
type stopTimer interface {
	Stop() bool
	Reset(time.Duration) bool
}

// afterFunc is time.AfterFunc's shape; tests pass one whose timer they
// fire by hand.
type afterFunc func(time.Duration, func()) stopTimer
