package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/app/demo"
)

func (a *app) serve(ctx context.Context, args []string) error {
	c, err := a.parseServe(args)
	if err != nil {
		return err
	}
	log := c.logger(a.stderr, slog.LevelDebug)
	guard, closeGuard, err := c.newGuard(ctx, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	// go-sdk logs every session at info level (one per request on the
	// stateless wire); keep its lines for --log-level debug.
	sdkLog := c.logger(a.stderr, slog.LevelWarn)
	if lvl, _ := parseLevel(c.logLevel); lvl <= slog.LevelDebug {
		sdkLog = log
	}
	server := demo.NewServer(guard, &demo.Options{Name: "mrtr", Version: version, Logger: sdkLog})
	stopMetrics, err := c.startMetrics(log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	if c.stdio {
		if c.auth.enabled() {
			// The MCP authorization spec is for HTTP; a stdio server's caller
			// is whoever started it.
			log.Warn("--auth-* flags do not apply to --stdio; every caller is anonymous")
		}
		ctx, cancel := a.untilDrain(ctx) // nothing to drain on stdio
		defer cancel()
		log.Info("mrtr serving on stdio")
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	h := gosdk.NewHTTPHandler(server, &gosdk.HTTPOptions{
		MaxRequestBodyBytes: c.maxBodyBytes, Logger: log,
		SessionTimeout: c.sessionTimeout, MaxSessions: c.maxSessions, AllowedHosts: c.allowedHostList(),
	})
	log.Info("mrtr limits", "max_body", c.maxBodyBytes, "read_timeout", c.readTimeout, "max_conns", c.maxConns,
		"session_timeout", c.sessionTimeout, "max_sessions", c.maxSessions)
	return c.serveMCP(ctx, log, h, false)
}

// serveConfig is commonConfig plus the flags only `mrtr serve` has.
type serveConfig struct {
	commonConfig
	stdio          bool
	sessionTimeout time.Duration // idle 2025-11-25 sessions close after this
	maxSessions    int           // live 2025-11-25 sessions at once
}

// serveAbout is the paragraph of `mrtr serve --help`.
const serveAbout = `Runs the reference MCP server: Streamable HTTP at http://ADDR/mcp (--addr, default 127.0.0.1:8080), or MCP on stdin/stdout with --stdio; every paused flow's requestState is sealed by the --keys ring. ` +
	`/healthz answers while the process serves, /readyz while the keys and the store are usable. ` +
	`Besides the conformance fixtures it has three demo tools that ask for input: deploy (confirm a deployment), transfer (confirm a quoted fee) and guess_number (a guessing game). ` +
	`Try: mrtr call http://127.0.0.1:8080/mcp guess_number. Every flag can also be given as the MRTR_* variable shown; a flag wins over its variable.`

// serveExamples end `mrtr serve --help`.
const serveExamples = `  mrtr serve                                   127.0.0.1:8080, an ephemeral key ring (with a warning)
  mrtr keygen --out keys.json && mrtr serve --keys keys.json
  mrtr serve --addr 0.0.0.0:8080 --keys keys.json --replay redis://127.0.0.1:6379/0
  mrtr serve --stdio                           MCP on stdin/stdout, for a client that runs a command
`

// serveFlags registers the flags of `mrtr serve`.
func serveFlags(f *flags, c *serveConfig) {
	commonFlags(f, &c.commonConfig)
	f.Bool(groupListen, &c.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	f.Duration(groupLimits, &c.sessionTimeout, "session-timeout", defaultSessionTimeout,
		"a 2025-11-25 session (Mcp-Session-Id) that sees no request for this long is closed; the client initializes again")
	f.Int(groupLimits, &c.maxSessions, "max-sessions", defaultMaxSessions, 1,
		"most live 2025-11-25 sessions at once; a new one beyond it gets HTTP 503, existing ones keep working")
}

// parseServe reads flags over environment variables over defaults.
func (a *app) parseServe(args []string) (*serveConfig, error) {
	c := new(serveConfig)
	f := a.newFlags("serve", "mrtr serve [flags]", serveAbout)
	f.examples = serveExamples
	serveFlags(f, c)
	if err := f.parse(a.getenv, args); err != nil {
		return nil, err
	}
	c.commonConfig.settle()
	c.getenv = a.getenv
	c.drainConfig.signal = a.drain
	c.audit.stdio = c.stdio // --audit - would write into the MCP channel
	return c, nil
}
