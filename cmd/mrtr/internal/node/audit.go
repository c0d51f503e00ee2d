package node

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/reqstate"
)

// auditConfig is what --audit and --audit-required say (serve and proxy).
type auditConfig struct {
	path     string // "" off, "-" stdout
	required bool
	Upstream string // proxy: what it fronts, redacted (auditUpstream)
	Stdio    bool   // serve --stdio: stdout is the MCP channel
}

// auditFlags registers --audit and --audit-required.
func auditFlags(f *base.Flags, c *auditConfig) {
	f.String(base.GroupTelemetry, &c.path, "audit", "", "append the audit trail to `PATH` (created with mode 0600, reopened on SIGHUP for logrotate; - for stdout): one JSON line per pause, resume, refused resume and completed call, hash-chained and MACed under the key ring (check it with mrtr audit verify); empty: no trail")
	f.Bool(base.GroupTelemetry, &c.required, "audit-required", false, "refuse a call (-32603) whose audit line could not be written, instead of logging and counting it (mrtr_audit_errors_total)")
	f.Check("audit-required", func() error {
		if c.required && c.path == "" {
			return base.FlagErr("audit-required", "needs --audit PATH")
		}
		return nil
	})
}

// openAudit opens the --audit trail as the guard's Auditor (nil without
// --audit), counts failed writes in mrtr_audit_errors_total when metrics
// are on, and reopens the file on SIGHUP. stop closes it.
func (c *CommonConfig) openAudit(log *slog.Logger, codec *reqstate.AESGCM, tel *Telemetry) (mrtr.Auditor, func(), error) {
	ac := &c.Audit
	if ac.path == "" {
		return nil, func() {}, nil
	}
	if ac.path == "-" && ac.Stdio {
		return nil, nil, base.FlagErr("audit", "- (stdout) is the MCP channel of --stdio: give a file")
	}
	var errs prometheus.Counter
	if tel.Registry != nil {
		errs = prometheus.NewCounter(prometheus.CounterOpts{Name: "mrtr_audit_errors_total",
			Help: "Audit trail lines that could not be written (with --audit-required, each refused its call)."})
		if err := tel.Registry.Register(errs); err != nil {
			return nil, nil, err
		}
	}
	node, _ := os.Hostname()
	opts := &audit.Options{
		Keys: codec.KeyRing, Node: node, Upstream: ac.Upstream, TraceIDs: tel.tracing != nil,
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
