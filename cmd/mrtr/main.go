// Command mrtr runs and operates MCP servers whose Multi Round-Trip
// Requests are sealed by mrtr: the reference server (serve), the sealing
// proxy in front of any MCP server (proxy), a terminal client (call), and
// key generation and rotation (keygen, keys).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
)

const usage = `mrtr: sealed Multi Round-Trip Requests for MCP servers

Usage:
  mrtr serve [flags]                     run the reference MCP server (Streamable HTTP at /mcp, or --stdio)
  mrtr proxy --upstream URL [flags]      seal the requestState of any MCP server (Streamable HTTP at /mcp)
  mrtr proxy [flags] -- COMMAND [ARG...] the same for a server run as a command over stdio (2025-11-25 ones bridged)
  mrtr call URL                          list a server's tools, prompts and resources
  mrtr call URL TOOL [--arg k=v ...]     call a tool, answering its questions in the terminal
  mrtr call URL --prompt NAME | --resource URI   get a prompt or read a resource the same way
  mrtr probe URL [flags]                 check a server's requestState handling from the outside (calls its tools)
  mrtr keygen [--id ID] [--out FILE]     print (or write) a new key ring
  mrtr audit verify --keys RING PATH...  check an --audit trail: every line's MAC and link
  mrtr keys check FILE                   validate a key ring and list its key ids
  mrtr keys status FILE [--max-age 90d]  each key's role, window and age; warns when the primary is old
  mrtr keys rotate FILE [--id ID]        put a new primary key first, keep the rest (--not-before/--not-after: its window)
  mrtr keys add FILE [--id ID]           add a new key second (rotation step 1; --not-before/--not-after: its window)
  mrtr keys promote FILE ID              move key ID first (rotation step 2)
  mrtr keys remove FILE ID               drop key ID (rotation step 3)
  mrtr keys window FILE ID [flags]       set (or clear: none) a key's --not-before/--not-after
  mrtr version                           print the version and build information

Run "mrtr COMMAND --help" for a command's flags.
`

// app holds the process's I/O so commands are testable without globals.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// buildInfo reads the binary's build information; nil means
	// debug.ReadBuildInfo.
	buildInfo func() (*debug.BuildInfo, bool)
	afterFunc afterFunc // the timer of mrtr call's --timeout; nil: time.AfterFunc
	// probeTimeout bounds mrtr proxy's era probe of a command upstream;
	// zero: 90 s (a test seam).
	probeTimeout time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// errUsage marks an error already explained by a usage message.
var errUsage = errors.New("usage")

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = a.serve(ctx, args[1:])
	case "proxy":
		err = a.proxy(ctx, args[1:])
	case "call":
		err = a.call(ctx, args[1:])
	case "probe":
		err = a.probe(ctx, args[1:])
	case "keygen":
		err = a.keygen(args[1:])
	case "keys":
		err = a.keys(args[1:])
	case "audit":
		err = a.audit(args[1:])
	case "version", "--version", "-version":
		a.printVersion()
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(a.stdout, usage)
		return 0
	default:
		fmt.Fprintf(a.stderr, "mrtr: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case probeExit(err) != 0:
		return probeExit(err)
	default:
		fmt.Fprintf(a.stderr, "mrtr %s: %v\n", args[0], err)
		return 1
	}
}

// newFlagSet returns a flag set that prints its usage to a.stderr.
func (a *app) newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "Usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags, allowing them before and after positional arguments,
// and returns the positional ones (those after a -- too).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, rest, err := parseArgs(fs, args)
	return append(pos, rest...), explain(fs.Output(), err)
}

// printVersion prints the command's version and, when the binary carries
// them, its module version and the VCS revision, time and dirty flag.
func (a *app) printVersion() {
	read := a.buildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	fmt.Fprintf(a.stdout, "mrtr %s\n", version)
	bi, ok := read()
	if !ok {
		return
	}
	mod := bi.Main.Version
	if mod == "" {
		mod = "(devel)"
	}
	fmt.Fprintf(a.stdout, "module %s %s\n", bi.Main.Path, mod)
	fmt.Fprintf(a.stdout, "go %s\n", bi.GoVersion)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified":
			fmt.Fprintf(a.stdout, "%s %s\n", s.Key, s.Value)
		}
	}
}
