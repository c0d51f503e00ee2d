// Command mrtr runs and operates MCP servers whose Multi Round-Trip
// Requests are sealed by mrtr: the reference server (serve), the sealing
// proxy in front of any MCP server (proxy), a terminal client (call), and
// key generation and rotation (keygen, keys).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keys"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/probe"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/runner"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
	"github.com/mrtr-go/mrtr/internal/supervise"
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
  mrtr audit verify --pub FILE.pub TRAIL...  check an --audit trail's signed checkpoints, no secret (--checkpoints LOG, --node NAME)
  mrtr audit verify --keys RING PATH...  check a trail written without checkpoints: every line's MAC and link
  mrtr audit keygen --out FILE           write a node's audit signing key (--audit-key FILE) and FILE.pub
  mrtr audit pubkey --keys RING          print the public key of the ring-derived audit signing key
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

// version is the version a release build stamped: go build -ldflags "-X
// main.version=1.2.3" (.goreleaser.yaml and scripts/image.sh do). A
// variable, not a constant, for that; main resolves an unstamped one
// (resolveVersion) into base.Version, the version the commands report.
var version string

// commands are mrtr's commands, as usage lists them.
var commands = []*base.Command{
	serve.Cmd,
	proxy.Cmd,
	runner.Cmd,
	call.Cmd,
	probe.Cmd,
	keys.KeygenCmd,
	audit.Cmd,
	keys.Cmd,
}

func main() {
	supervise.Init() // before any flag parsing or signal handling
	base.Version = resolveVersion(version, nil)
	a := &base.App{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	ctx, drain := signals()
	a.Drain = drain
	os.Exit(run(ctx, a, os.Args[1:]))
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

// run runs the command args name and returns the exit status.
func run(ctx context.Context, a *base.App, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-version":
		printVersion(a)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(a.Stdout, usage)
		return 0
	}
	if status, ok := base.Dispatch(ctx, a, commands, args); ok {
		return status
	}
	fmt.Fprintf(a.Stderr, "mrtr: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// printVersion prints the command's version and, when the binary carries
// them, its module version and the VCS revision, time and dirty flag.
func printVersion(a *base.App) {
	read := a.BuildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	fmt.Fprintf(a.Stdout, "mrtr %s\n", resolveVersion(version, read))
	bi, ok := read()
	if !ok {
		return
	}
	mod := bi.Main.Version
	if mod == "" {
		mod = "(devel)"
	}
	fmt.Fprintf(a.Stdout, "module %s %s\n", bi.Main.Path, mod)
	fmt.Fprintf(a.Stdout, "go %s\n", bi.GoVersion)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified":
			fmt.Fprintf(a.Stdout, "%s %s\n", s.Key, s.Value)
		}
	}
}
