package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/reqstate"
)

// auditConfig is what --audit and the flags beside it say (serve and
// proxy).
type auditConfig struct {
	path       string // "" off, "-" stdout
	required   bool
	key        string        // --audit-key: the node's signing key file; "": derived from the ring
	checkpoint time.Duration // --audit-checkpoint
	epoch      time.Duration // --audit-epoch
	node       string        // --node; "": the host name
	Upstream   string        // proxy: what it fronts, redacted (auditUpstream)
	Stdio      bool          // serve --stdio: stdout is the MCP channel
}

// auditFlags registers --audit, --audit-required, --audit-key,
// --audit-checkpoint, --audit-epoch and --node.
func auditFlags(f *base.Flags, c *auditConfig) {
	f.String(base.GroupTelemetry, &c.path, "audit", "", "append the audit trail to `PATH` (created with mode 0600, reopened on SIGHUP for logrotate; - for stdout): one JSON line per pause, resume, refused resume and completed call, hash-chained and MACed under the key ring (check it with mrtr audit verify); empty: no trail")
	f.Bool(base.GroupTelemetry, &c.required, "audit-required", false, "refuse a call (-32603) whose audit line could not be written, instead of logging and counting it (mrtr_audit_errors_total)")
	f.Check("audit-required", func() error {
		if c.required && c.path == "" {
			return base.FlagErr("audit-required", "needs --audit PATH")
		}
		return nil
	})
	f.String(base.GroupTelemetry, &c.key, "audit-key", "", "sign the trail's checkpoints with the node key in `FILE` (mrtr audit keygen --out FILE; created at the first start when absent, with FILE.pub, the public key an auditor checks the trail with: mrtr audit verify --pub FILE.pub). "+
		"In a directory mrtr can write, the key evolves every --audit-epoch (forward security); else it signs without evolving. Empty: a key derived from the key ring's primary key (mrtr audit pubkey --keys RING prints its public key), which every holder of the ring can sign with")
	f.Duration(base.GroupTelemetry, &c.checkpoint, "audit-checkpoint", audit.DefaultCheckpointInterval, "how often a signed checkpoint seals the trail's new lines (also at SIGHUP and at a clean stop); each is logged as one INFO record, for the log pipeline to carry off the host")
	f.Duration(base.GroupTelemetry, &c.epoch, "audit-epoch", audit.DefaultEpoch, "how long an --audit-key key signs before it evolves one way (the old key erased)")
	f.String(base.GroupTelemetry, &c.node, "node", "", "this node's `NAME` in the audit trail's lines and checkpoints (mrtr audit verify --node NAME); empty: the host name. Not the replicas' directory id, which is new at every start")
}

// nodeName is --node, or the host name.
func (c *auditConfig) nodeName() string {
	if c.node != "" {
		return c.node
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "mrtr"
	}
	return h
}

// signer returns the Signer of the trail's checkpoints: the --audit-key
// file (generated when absent), else a key derived from the ring's
// primary key. It logs the mode, the public key and what the mode gives
// up.
func (c *auditConfig) signer(log *slog.Logger, ring *reqstate.KeyRing) (*audit.Signer, error) {
	var s *audit.Signer
	var err error
	attrs := []any{}
	if c.key == "" {
		kid := ring.Primary()
		if s, err = audit.RingSigner(ring, kid); err != nil {
			return nil, fmt.Errorf("--audit: the signing key derived from the key ring: %w", err)
		}
		attrs = append(attrs, "kid", kid)
	} else {
		if _, err := os.Stat(c.key); errors.Is(err, fs.ErrNotExist) {
			pub, err := audit.GenerateKeyFile(c.key, nil)
			if err != nil {
				return nil, fmt.Errorf("--audit-key: %w", err)
			}
			log.Warn("mrtr audit key generated: pin its public key off this host (FILE.pub) before you rely on the trail", "path", c.key, "pub_path", c.key+".pub", "public_key", pub.String())
		}
		if s, err = audit.LoadSigner(c.key); err != nil {
			return nil, fmt.Errorf("--audit-key: %w", err)
		}
		attrs = append(attrs, "path", c.key, "epoch", s.Epoch())
		if why := s.WhyStatic(); why != "" {
			attrs = append(attrs, "why_static", why)
		}
	}
	m := s.Mode()
	attrs = append([]any{"mode", m.String(), "public_key", s.PublicKey().String()}, attrs...)
	attrs = append(attrs, "gives_up", m.GivesUp())
	level := slog.LevelInfo
	if m != audit.KeyEvolving {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "mrtr audit signing key", attrs...)
	return s, nil
}

// loggedCheckpoint is a checkpoint as the log carries it: its JSON object
// in a JSON log (MarshalJSON), the same JSON as a quoted string in a
// text log (MarshalText), which mrtr audit verify --checkpoints reads
// from either.
type loggedCheckpoint struct{ audit.Checkpoint }

// MarshalText implements encoding.TextMarshaler: the checkpoint's JSON.
func (c loggedCheckpoint) MarshalText() ([]byte, error) { return c.MarshalJSON() }

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
	signer, err := ac.signer(log, codec.KeyRing())
	if err != nil {
		return nil, nil, err
	}
	opts := &audit.Options{
		Keys: codec.KeyRing, Node: ac.nodeName(), Upstream: ac.Upstream, TraceIDs: tel.tracing != nil,
		Required: ac.required, Logger: log,
		OnError: func(error) {
			if errs != nil {
				errs.Inc()
			}
		},
		Signer: signer, CheckpointInterval: ac.checkpoint, Epoch: ac.epoch,
		// One INFO record per checkpoint: the log pipeline carries a copy
		// off the host, for mrtr audit verify --checkpoints.
		OnCheckpoint: func(cp audit.Checkpoint) {
			log.Info("mrtr audit checkpoint", audit.CheckpointLogKey, loggedCheckpoint{cp})
		},
	}
	if ac.path == "-" {
		log.Info("mrtr audit trail on stdout", "required", ac.required, "node", opts.Node)
		return audit.NewWriter(os.Stdout, "", opts), func() {}, nil
	}
	fi, err := os.Stat(ac.path)
	continues := err == nil && fi.Size() > 0 // the trail goes on (with a Signer, the first line is always written by now)
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
	log.Info("mrtr audit trail", "path", ac.path, "required", ac.required, "node", opts.Node, "continues", continues)
	return w, func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
		if err := w.Close(); err != nil {
			log.Error("mrtr audit trail close", "error", err)
		}
	}, nil
}
