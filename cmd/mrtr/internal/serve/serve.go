package serve

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
)

// Cmd is mrtr serve.
var Cmd = &base.Command{Name: "serve", Run: serve, Drains: true}

// serve runs the reference server until ctx ends or a drain completes.
func serve(ctx context.Context, a *base.App, args []string) error {
	c, err := Parse(a, args)
	if err != nil {
		return err
	}
	log := c.Logger(a.Stderr, slog.LevelDebug)
	guard, closeGuard, err := c.NewGuard(ctx, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	// go-sdk logs every session at info level (one per request on the
	// stateless wire); keep its lines for --log-level debug.
	sdkLog := c.Logger(a.Stderr, slog.LevelWarn)
	if lvl, _ := base.ParseLevel(c.LogLevel); lvl <= slog.LevelDebug {
		sdkLog = log
	}
	server := demo.NewServer(guard, &demo.Options{Name: "mrtr", Version: base.Version, Logger: sdkLog,
		Tasks: c.taskManager(guard, log), TaskObserver: c.Tel.TaskObserver})
	stopMetrics, err := c.StartMetrics(log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	if c.stdio {
		if c.Auth.Enabled() {
			// The MCP authorization spec is for HTTP; a stdio server's caller
			// is whoever started it.
			log.Warn("--auth-* flags do not apply to --stdio; every caller is anonymous")
		}
		ctx, cancel := a.UntilDrain(ctx) // nothing to drain on stdio
		defer cancel()
		log.Info("mrtr serving on stdio")
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	h := gosdk.NewHTTPHandler(server, &gosdk.HTTPOptions{
		MaxRequestBodyBytes: c.MaxBodyBytes, Logger: log,
		SessionTimeout: c.sessionTimeout, MaxSessions: c.maxSessions, AllowedHosts: c.AllowedHostList(),
	})
	log.Info("mrtr limits", "max_body", c.MaxBodyBytes, "read_timeout", c.ReadTimeout, "max_conns", c.MaxConns,
		"session_timeout", c.sessionTimeout, "max_sessions", c.maxSessions)
	return c.ServeMCP(ctx, log, h, false)
}

// taskManager keeps the task fixtures' tasks on the replay store's Redis
// when --replay names one, so that every replica sharing it serves every
// task (the store's prefix, timeout and acknowledgement rules apply); nil
// (a bounded memory store in demo) otherwise.
func (c *Config) taskManager(guard *mrtr.Guard, log *slog.Logger) *task.Manager {
	if c.RedisStore == nil {
		return nil
	}
	return task.NewManager(redistask.New(c.RedisStore, nil), &task.Options{Server: guard.Policy().ServerID, Logger: log, Observer: c.Tel.TaskObserver})
}

// Config is CommonConfig plus the flags only `mrtr serve` has.
type Config struct {
	node.CommonConfig
	stdio          bool
	sessionTimeout time.Duration // idle 2025-11-25 sessions close after this
	maxSessions    int           // live 2025-11-25 sessions at once
}

// About is the paragraph of `mrtr serve --help`.
const About = `Runs the reference MCP server: Streamable HTTP at http://ADDR/mcp (--addr, default 127.0.0.1:8080), or MCP on stdin/stdout with --stdio; every paused flow's requestState is sealed by the --keys ring. ` +
	`/healthz answers while the process serves, /readyz while the keys and the store are usable. ` +
	`Besides the conformance fixtures it has three demo tools that ask for input: deploy (confirm a deployment), transfer (confirm a quoted fee) and guess_number (a guessing game). ` +
	`Its task fixtures (confirm_delete, multi_input, slow_compute, ...) answer as tasks (the io.modelcontextprotocol/tasks extension); with --replay redis://... the tasks are kept in that Redis, so every replica sharing it and --server-id serves every task. ` +
	`Try: mrtr call http://127.0.0.1:8080/mcp guess_number. Every flag can also be given as the MRTR_* variable shown; a flag wins over its variable.`

// Examples end `mrtr serve --help`.
const Examples = `  mrtr serve                                   127.0.0.1:8080, an ephemeral key ring (with a warning)
  mrtr keygen --out keys.json && mrtr serve --keys keys.json
  mrtr serve --addr 0.0.0.0:8080 --keys keys.json --replay redis://127.0.0.1:6379/0
  mrtr serve --stdio                           MCP on stdin/stdout, for a client that runs a command
`

// Flags registers the flags of `mrtr serve`.
func Flags(f *base.Flags, c *Config) {
	node.CommonFlags(f, &c.CommonConfig)
	f.Bool(base.GroupListen, &c.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	f.Duration(base.GroupLimits, &c.sessionTimeout, "session-timeout", node.DefaultSessionTimeout,
		"a 2025-11-25 session (Mcp-Session-Id) that sees no request for this long is closed; the client initializes again")
	f.Int(base.GroupLimits, &c.maxSessions, "max-sessions", node.DefaultMaxSessions, 1,
		"most live 2025-11-25 sessions at once; a new one beyond it gets HTTP 503, existing ones keep working")
}

// Parse reads flags over environment variables over defaults.
func Parse(a *base.App, args []string) (*Config, error) {
	c := new(Config)
	f := a.NewFlags("serve", "mrtr serve [flags]", About)
	f.Examples = Examples
	Flags(f, c)
	if err := f.Parse(a.Getenv, args); err != nil {
		return nil, err
	}
	c.CommonConfig.Settle()
	c.Getenv = a.Getenv
	c.DrainConfig.Signal = a.Drain
	c.Audit.Stdio = c.stdio // --audit - would write into the MCP channel
	return c, nil
}
