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
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

const usage = `mrtr: sealed Multi Round-Trip Requests for MCP servers

Usage:
  mrtr serve [flags]                     run the reference MCP server (Streamable HTTP at /mcp, or --stdio)
  mrtr proxy --upstream URL [flags]      seal the requestState of any MCP server (Streamable HTTP at /mcp)
  mrtr proxy [flags] -- COMMAND [ARG...] the same for a server run as a command over stdio (2025-11-25 ones bridged)
  mrtr proxy --runner SOCKET [flags]     the same, each process a child of mrtr runner (another uid: it never sees the keys)
  mrtr runner [flags] -- COMMAND [ARG...] run the command for proxy --runner under a uid of its own (--listen SOCKET --allow-uid UID)
  mrtr call URL                          list a server's tools, prompts and resources
  mrtr call URL TOOL [--arg k=v ...]     call a tool, answering its questions in the terminal
  mrtr call URL --prompt NAME | --resource URI   get a prompt or read a resource the same way
  mrtr probe URL [flags]                 check a server's requestState handling from the outside (calls its tools)
  mrtr probe [flags] -- COMMAND [ARG...] the same for a server run as a command over stdio
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

func main() {
	superviseIfAsked(os.Args) // before any flag parsing or signal handling
	version = resolveVersion(version, nil)
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, drain := signals()
	a.drain = drain
	os.Exit(a.run(ctx, os.Args[1:]))
}

// signals returns a channel closed by the first SIGTERM or SIGINT and a
// context that ends at the second: the first starts a drain, the second
// stops at once.
func signals() (context.Context, <-chan struct{}) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	drain := make(chan struct{})
	go func() {
		<-sig
		close(drain)
		<-sig
		cancel()
	}()
	return ctx, drain
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return 2
	}
	var err error
	if args[0] != "serve" && args[0] != "proxy" && args[0] != "runner" {
		var cancel context.CancelFunc
		ctx, cancel = a.untilDrain(ctx)
		defer cancel()
	}
	switch args[0] {
	case "serve":
		err = a.serve(ctx, args[1:])
	case "proxy":
		err = a.proxy(ctx, args[1:])
	case "runner":
		err = a.runner(ctx, args[1:])
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
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(a.stderr, "mrtr %s: %v\n", args[0], err)
		return exitInterrupted
	case isFlagError(err):
		// A bad or missing flag value, from the command line or the
		// environment, found by the flag package or by a check: a usage
		// error like an unknown flag.
		fmt.Fprintf(a.stderr, "mrtr %s: %v\n%s", args[0], err, helpHint(args[0]))
		return 2
	case probeExit(err) != 0:
		return probeExit(err)
	default:
		fmt.Fprintf(a.stderr, "mrtr %s: %v\n", args[0], err)
		return 1
	}
}

// printVersion prints the command's version and, when the binary carries
// them, its module version and the VCS revision, time and dirty flag.
func (a *app) printVersion() {
	read := a.buildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	fmt.Fprintf(a.stdout, "mrtr %s\n", resolveVersion(version, read))
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
