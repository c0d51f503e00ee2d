package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	mrtrrunner "github.com/mrtr-go/mrtr/internal/runner"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/supervise"
)

// runnerConfig is the flags of `mrtr runner`.
type runnerConfig struct {
	listen       string   // --listen SOCKET
	allow        []string // --allow-uid, as given
	socketGroup  string   // --socket-group GROUP; empty: the runner's own group
	maxChildren  int
	drainTimeout time.Duration
	logFormat    string
	logLevel     string
	command      []string // after --

	uids     []uint32 // --allow-uid resolved
	allowAny bool     // --allow-uid any
	gid      int      // --socket-group resolved; -1: none given
}

// runnerAbout is the paragraph of `mrtr runner --help`.
const runnerAbout = `Runs the upstream command for mrtr proxy --runner SOCKET under a uid of its own, so that the key ring and the code the proxy fronts never share a uid: it holds no secret (it refuses --keys, --audit-key and every MRTR_* variable, and its children get none). ` +
	`It listens on the Unix socket --listen (mode 0660, group --socket-group); each connection is one fresh child of the command after --, whose stdin and stdout are that connection, stopped when the connection closes (its stderr goes to the runner's log, rate-limited). ` +
	`The peer's uid (SO_PEERCRED) must be one of --allow-uid; the runner's own uid, which its children share, and the overflow uid 65534 are always refused. ` +
	`Its flags have no MRTR_* variables. Children of one runner share its uid: one can trace or signal another.`

// runnerExamples end `mrtr runner --help`.
const runnerExamples = `  mrtr runner --listen /run/mrtr-runner/runner.sock --allow-uid 990 --socket-group mrtr-runner \
      -- npx -y @modelcontextprotocol/server-everything
  mrtr proxy --keys keys.json --runner /run/mrtr-runner/runner.sock
`

// runnerSynopsis is the usage line of `mrtr runner`.
const runnerSynopsis = "mrtr runner --listen SOCKET --allow-uid UID [flags] -- COMMAND [ARG...]"

// runnerSecretFlags are flags of serve and proxy that name a secret: the
// runner refuses them by name rather than as unknown flags.
var runnerSecretFlags = []string{"keys", "audit-key"}

// runnerFlags registers the flags of `mrtr runner`.
func runnerFlags(f *base.Flags, c *runnerConfig) {
	f.String(base.GroupListen, &c.listen, "listen", "", "path of the Unix `SOCKET` to listen on (created with mode 0660; a stale socket left by a runner that is gone is replaced, anything else at the path refused)")
	f.Check("listen", func() error {
		if c.listen == "" {
			return base.FlagErr("listen", "is required: the Unix socket mrtr proxy --runner connects to")
		}
		return nil
	})
	f.Strings(base.GroupListen, &c.allow, "allow-uid", "`UID` (a number or a user name; several comma-separated) a connecting process must run as; any: every uid but the runner's own and 65534, leaving the socket's mode and group as the only control (said at start)")
	f.Check("allow-uid", func() error { return c.resolveAllow() })
	f.String(base.GroupListen, &c.socketGroup, "socket-group", "", "`GROUP` (a name or a number) the socket is given, whose members (the proxy's user) may connect; empty: the runner's own group")
	f.Check("socket-group", func() error {
		c.gid = -1
		if c.socketGroup == "" {
			return nil
		}
		g, err := lookupGroupSpec(c.socketGroup)
		if err != nil {
			return base.FlagErr("socket-group", "%v", err)
		}
		c.gid = g
		return nil
	})
	f.Int(base.GroupLimits, &c.maxChildren, "max-children", mrtrrunner.DefaultMaxChildren, 1, "most children running at once (one per connection); a connection beyond it is closed at once, with a warning")
	f.Fs.DurationVar(&c.drainTimeout, "drain-timeout", node.DefaultDrainTimeout, "")
	f.Add(base.GroupListen, "drain-timeout", "duration", "duration", base.ShortDuration(node.DefaultDrainTimeout),
		"on SIGTERM or SIGINT, stop accepting and serve the open connections until they end, for at most this long, then stop their children; 0: stop at once. A second signal stops at once")
	f.Check("drain-timeout", func() error {
		if c.drainTimeout < 0 {
			return base.FlagErr("drain-timeout", "%q is negative (0 stops at once)", c.drainTimeout.String())
		}
		return nil
	})
	f.Choice(base.GroupTelemetry, &c.logFormat, "log-format", "text", []string{"text", "json"}, "log format")
	f.String(base.GroupTelemetry, &c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.Check("log-level", func() error { _, err := base.ParseLevel(c.logLevel); return err })
	// No MRTR_* variable: the runner refuses every one of them.
	f.Envs = nil
	for _, d := range f.Docs {
		d.Env = ""
	}
}

// resolveAllow reads --allow-uid: numbers, user names or any.
func (c *runnerConfig) resolveAllow() error {
	c.uids, c.allowAny = nil, false
	for _, v := range c.allow {
		for _, w := range strings.Split(v, ",") {
			w = strings.TrimSpace(w)
			switch {
			case w == "":
				continue
			case w == "any":
				c.allowAny = true
				continue
			}
			uid, err := lookupUIDSpec(w)
			if err != nil {
				return base.FlagErr("allow-uid", "%v", err)
			}
			c.uids = append(c.uids, uid)
		}
	}
	if len(c.uids) == 0 && !c.allowAny {
		return base.FlagErr("allow-uid", "is required: the uid of the proxy that connects (a number or a user name), or any")
	}
	return nil
}

// lookupUIDSpec is a uid given as a number or a user name.
func lookupUIDSpec(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("%q is no uid and no known user", s)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("user %q has the uid %q, not a number", s, u.Uid)
	}
	return uint32(n), nil
}

// lookupGroupSpec is a gid given as a number or a group name.
func lookupGroupSpec(s string) (int, error) {
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return int(n), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("%q is no gid and no known group", s)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("group %q has the gid %q, not a number", s, g.Gid)
	}
	return int(n), nil
}

// secretFlag is the first flag of args (before any --) naming a secret.
func secretFlag(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			name, ok = strings.CutPrefix(a, "-")
		}
		name, _, _ = strings.Cut(name, "=")
		if ok && slices.Contains(runnerSecretFlags, name) {
			return name
		}
	}
	return ""
}

// reservedVar is the name of the first MRTR_* variable of environ.
func reservedVar(environ []string) string {
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, stdio.ReservedPrefix) {
			return name
		}
	}
	return ""
}

// parseRunner reads the runner's flags (never the environment).
func parseRunner(a *base.App, args []string) (*runnerConfig, error) {
	c := &runnerConfig{gid: -1}
	f := a.NewFlags("runner", runnerSynopsis, runnerAbout)
	f.Examples = runnerExamples
	runnerFlags(f, c)
	var rest []string
	f.Command(&rest, "COMMAND [ARG...]")
	if name := secretFlag(args); name != "" {
		return nil, base.FlagErr(name, "the runner holds no secret: give it to mrtr proxy, which reaches the runner with --runner SOCKET")
	}
	if i := slices.Index(args, "--"); i >= 0 { // the command, run as is: never parsed as flags
		c.command, args = args[i+1:], args[:i]
		if len(c.command) == 0 {
			return nil, base.FlagErr("listen", "-- must be followed by the command each connection runs")
		}
	}
	if err := f.Parse(func(string) string { return "" }, args); err != nil {
		return nil, err
	}
	if len(c.command) == 0 {
		return nil, base.FlagErr("listen", "the command each connection runs must follow --: mrtr runner --listen SOCKET --allow-uid UID -- npx -y PACKAGE")
	}
	return c, nil
}

// errRunnerEnv is the runner's refusal of an MRTR_* variable.
var errRunnerEnv = errors.New("the runner holds no secret and takes no MRTR_* variable: unset it (its flags have no variables)")

// Cmd is mrtr runner.
var Cmd = &base.Command{Name: "runner", Run: runner, Drains: true}

// runner runs `mrtr runner`.
func runner(ctx context.Context, a *base.App, args []string) error {
	c, err := parseRunner(a, args)
	if err != nil {
		return err
	}
	environ := os.Environ
	if a.Environ != nil {
		environ = a.Environ
	}
	if name := reservedVar(environ()); name != "" {
		return fmt.Errorf("$%s is set: %w", name, errRunnerEnv) // its name, never its value
	}
	if !mrtrrunner.Supported {
		return fmt.Errorf("the runner tells a peer's uid by SO_PEERCRED, which %s lacks: it runs on Linux only", runtime.GOOS)
	}
	if err := base.CheckCommand(c.command); err != nil {
		return err
	}
	// Its children share its uid: they must not trace it (and read what
	// it relays for their siblings).
	if err := supervise.Undumpable(); err != nil {
		return err
	}
	level, _ := base.ParseLevel(c.logLevel)
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if c.logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(a.Stderr, opts))
	} else {
		log = slog.New(slog.NewTextHandler(a.Stderr, opts))
	}
	ln, err := mrtrrunner.Listen(c.listen, c.gid)
	if err != nil {
		return err
	}
	name := base.CommandName(c.command)
	srv := mrtrrunner.New(mrtrrunner.Options{
		Child:       stdio.Config{Path: c.command[0], Args: c.command[1:], Supervisor: supervise.Argv()},
		AllowUIDs:   c.uids,
		AllowAny:    c.allowAny,
		MaxChildren: c.maxChildren,
		Logger:      log.With("upstream", name),
	})
	if c.allowAny {
		log.Warn("mrtr runner: --allow-uid any: every peer but the runner's own uid and 65534 is served: the socket's mode (0660) and group are the only control",
			"socket", c.listen, "socket_group", c.socketGroup)
	}
	if os.Geteuid() == 0 {
		log.Warn("mrtr runner: runs as root, and so does the command: give the runner a user of its own")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("mrtr runner: listening; each connection runs the command", "socket", c.listen, "upstream", name,
		"allow_uid", c.uids, "allow_any", c.allowAny, "socket_group", c.socketGroup, "max_children", c.maxChildren)
	drain := a.Drain
	select {
	case err := <-served: // the listener failed
		sctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Shutdown(sctx)
		return fmt.Errorf("serve %s: %w", c.listen, err)
	case <-drain:
	case <-ctx.Done():
	}
	log.Info("mrtr runner draining: no new connection; serving the open ones until they end (a second SIGTERM or SIGINT stops at once)",
		"running", srv.Running(), "drain_timeout", c.drainTimeout)
	dctx, cancel := context.WithTimeout(ctx, c.drainTimeout)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("mrtr runner: drain cut short: the children left were stopped", "why", drainEnd(ctx))
	} else {
		log.Info("mrtr runner drained: no connection open")
	}
	<-served
	return nil
}

// drainEnd says why a drain was cut short: the second signal (ctx
// ended) or --drain-timeout.
func drainEnd(ctx context.Context) string {
	if ctx.Err() != nil {
		return "second signal"
	}
	return "--drain-timeout"
}
