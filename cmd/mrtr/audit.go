package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/reqstate"
)

// auditConfig is what --audit and --audit-required say (serve and proxy).
type auditConfig struct {
	path     string // "" off, "-" stdout
	required bool
	upstream string // proxy: what it fronts, redacted (auditUpstream)
	stdio    bool   // serve --stdio: stdout is the MCP channel
}

// auditFlags registers --audit and --audit-required.
func auditFlags(f *flags, c *auditConfig) {
	f.String(groupTelemetry, &c.path, "audit", "", "append the audit trail to `PATH` (created with mode 0600, reopened on SIGHUP for logrotate; - for stdout): one JSON line per pause, resume, refused resume and completed call, hash-chained and MACed under the key ring (check it with mrtr audit verify); empty: no trail")
	f.Bool(groupTelemetry, &c.required, "audit-required", false, "refuse a call (-32603) whose audit line could not be written, instead of logging and counting it (mrtr_audit_errors_total)")
	f.check("audit-required", func() error {
		if c.required && c.path == "" {
			return flagErr("audit-required", "needs --audit PATH")
		}
		return nil
	})
}

// auditUpstream is how a proxy's audit lines name its upstream: the URL
// without credentials, or the command it runs.
func auditUpstream(c *proxyConfig) string {
	if len(c.command) > 0 {
		return "command " + commandName(c.command)
	}
	if c.runner != "" {
		return "runner " + c.runner
	}
	if u, err := url.Parse(c.upstream); err == nil {
		return u.Redacted()
	}
	return ""
}

// openAudit opens the --audit trail as the guard's Auditor (nil without
// --audit), counts failed writes in mrtr_audit_errors_total when metrics
// are on, and reopens the file on SIGHUP. stop closes it.
func (c *commonConfig) openAudit(log *slog.Logger, codec *reqstate.AESGCM, tel *telemetry) (mrtr.Auditor, func(), error) {
	ac := &c.audit
	if ac.path == "" {
		return nil, func() {}, nil
	}
	if ac.path == "-" && ac.stdio {
		return nil, nil, flagErr("audit", "- (stdout) is the MCP channel of --stdio: give a file")
	}
	var errs prometheus.Counter
	if tel.registry != nil {
		errs = prometheus.NewCounter(prometheus.CounterOpts{Name: "mrtr_audit_errors_total",
			Help: "Audit trail lines that could not be written (with --audit-required, each refused its call)."})
		if err := tel.registry.Register(errs); err != nil {
			return nil, nil, err
		}
	}
	node, _ := os.Hostname()
	opts := &audit.Options{
		Keys: codec.KeyRing, Node: node, Upstream: ac.upstream, TraceIDs: tel.tracing != nil,
		Required: ac.required, Logger: log,
		OnError: func(error) {
			if errs != nil {
				errs.Inc()
			}
		},
	}
	if ac.path == "-" {
		log.Info("mrtr audit trail on stdout", "required", ac.required)
		return audit.NewWriter(os.Stdout, "", opts), func() {}, nil
	}
	w, err := audit.OpenFile(ac.path, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("--audit: %w", err)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // beside the key ring's reload (keyreload.go)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				if err := w.Reopen(); err != nil {
					log.Error("mrtr audit trail not reopened on SIGHUP; writing on to the file it had", "path", ac.path, "error", err)
					continue
				}
				log.Info("mrtr audit trail reopened on SIGHUP", "path", ac.path)
			}
		}
	})
	log.Info("mrtr audit trail", "path", ac.path, "required", ac.required, "continues", w.Prev() != "")
	return w, func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
		if err := w.Close(); err != nil {
			log.Error("mrtr audit trail close", "error", err)
		}
	}, nil
}

const auditUsage = `Usage: mrtr audit verify --keys RING [--continued] PATH...

Checks an audit trail written with --audit: every line's MAC under the
ring key its kid names, and every line's link (prev) to the line before.
Several paths are one chain, oldest first (after logrotate: audit.log.1
audit.log). The first line must start a chain unless --continued (a
rotated file checked without the ones before it).
Exits 0 when every line holds, else 1, naming the first bad line: altered
(its MAC fails), broken link (a line deleted or inserted before it),
truncated (the file ends inside a line, or a torn write), unknown key.
`

// audit runs `mrtr audit verify`.
func (a *app) audit(args []string) error {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		fmt.Fprint(a.stdout, auditUsage) // help asked for: on stdout
		return nil
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprint(a.stderr, auditUsage)
		return errUsage
	}
	fs := a.newFlagSet("audit verify", "mrtr audit verify --keys RING [--continued] PATH...")
	keys := fs.String("keys", "", "key ring `FILE` the trail was written under (a ring holding its keys)")
	continued := fs.Bool("continued", false, "accept any link on the first line (a rotated file checked alone)")
	paths, err := a.parse(fs, args[1:])
	if err != nil {
		return err
	}
	if *keys == "" || len(paths) == 0 {
		fmt.Fprint(a.stderr, auditUsage)
		return errUsage
	}
	ring, err := reqstate.LoadKeyRing(*keys)
	if err != nil {
		return keyFileHint(*keys, err)
	}
	opts := &audit.VerifyOptions{Continued: *continued}
	total := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		res, err := audit.Verify(f, ring, opts)
		f.Close()
		if le := (*audit.LineError)(nil); errors.As(err, &le) {
			return fmt.Errorf("%s: %w (%d good lines before it)", p, err, res.Lines)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		fmt.Fprintf(a.stdout, "%s: %d lines, every MAC and link holds\n", p, res.Lines)
		total += res.Lines
		opts = &audit.VerifyOptions{After: res.Last}
	}
	if len(paths) > 1 {
		fmt.Fprintf(a.stdout, "%d lines in %d files, one chain\n", total, len(paths))
	}
	return nil
}

// auditRefusalsOnly is the Auditor of the replicas' first check of a
// resume (replicas.go): it records a token refused there, which goes no
// further, and nothing else; the guard that serves the call records its
// accepted resume, its pauses and its answer.
type auditRefusalsOnly struct{ next mrtr.Auditor }

func (a auditRefusalsOnly) Resumed(ctx context.Context, e mrtr.ResumeEvent) error {
	if e.Outcome == mrtr.OutcomeOK {
		return nil
	}
	return a.next.Resumed(ctx, e)
}
func (auditRefusalsOnly) Paused(context.Context, mrtr.PauseEvent) error { return nil }
func (auditRefusalsOnly) Ended(context.Context, mrtr.EndEvent) error    { return nil }
