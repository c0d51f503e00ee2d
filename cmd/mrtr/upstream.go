package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/internal/stdio"
)

// The --upstream-era values.
const (
	eraAuto   = "auto"
	eraModern = "modern"
	eraLegacy = "legacy"
)

// stdioUpstreamURL is the proxy's Upstream when the upstream is a command:
// requests never leave the process (the transport serves them), so it is
// a name, not an address.
const stdioUpstreamURL = "http://stdio.upstream/mcp"

// upstreamConfig is what `mrtr proxy` knows of an upstream that is a
// command, or that may speak 2025-11-25 only.
type upstreamConfig struct {
	obs      *telemetry // set by the proxy: where /readyz and /metrics learn of the upstream
	command  []string   // after --; empty for --upstream URL
	era      string
	env      []string // --upstream-env K=V
	roots    []string // --roots URI
	maxProcs int
	maxHolds int
}

// upstreamFlags registers the flags of upstreamConfig.
func upstreamFlags(f *flags, c *upstreamConfig) {
	f.Choice(groupUpstream, &c.era, "upstream-era", eraAuto, []string{eraAuto, eraModern, eraLegacy},
		"`ERA` of the upstream: auto (probe it: server/discover on stdio), modern (2026-07-28) or legacy (2025-11-25: its mid-call elicitation, sampling and roots requests become sealed rounds)")
	f.List(groupUpstream, &c.env, "upstream-env", "\n", "`K=V` added to a command upstream's environment (repeatable; the variable: one per line); the proxy's MRTR_* variables never reach it")
	f.List(groupUpstream, &c.roots, "roots", ",", "`URI` of a root the proxy answers a legacy upstream's roots/list with when no call is waiting for one (repeatable; the variable: comma-separated)")
	f.Int(groupLimits, &c.maxProcs, "max-procs", bridge.DefaultMaxSessions, 1,
		"most upstream processes (legacy sessions on HTTP) open at once; a call needing one more gets an error")
	f.Int(groupLimits, &c.maxHolds, "max-holds", bridge.DefaultMaxHolds, 1,
		"most legacy calls held waiting for a client's answers; a call that would pause beyond it gets an error")
}

// instrument adds the command upstream to /readyz (unready while it
// cannot be started) and to /metrics: the processes running, the idle
// ones among them and the calls held for an answer.
func (c *upstreamConfig) instrument(ready func(context.Context) error, stats func() (procs, idle, holds int)) {
	if c.obs == nil {
		return
	}
	c.obs.health.Checks = append(c.obs.health.Checks, observe.Check{Name: "upstream", Fn: ready})
	if c.obs.registry == nil {
		return
	}
	for _, g := range []struct {
		name, help string
		v          func() int
	}{
		{"mrtr_upstream_processes", "Upstream processes running (a command upstream's children).", func() int { p, _, _ := stats(); return p }},
		{"mrtr_upstream_processes_idle", "Upstream processes idle, kept for their caller's next call.", func() int { _, i, _ := stats(); return i }},
		{"mrtr_bridge_held_calls", "Calls of a 2025-11-25 upstream held for a client's answers.", func() int { _, _, h := stats(); return h }},
	} {
		_ = c.obs.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 { return float64(g.v()) }))
	}
}

// childUpstream is a stdio child as the bridge's Upstream.
type childUpstream struct{ *stdio.Child }

func (c childUpstream) Close(ctx context.Context) error {
	err := c.Stop(ctx)
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) {
		return nil // stopping ends it with a signal or status: that is the point
	}
	return err
}

// commandName is how logs name a command upstream: its program, never its
// arguments (they may carry secrets).
func commandName(cmd []string) string { return filepath.Base(cmd[0]) }

// upstreamTransport returns the transport the proxy reaches a command
// upstream (or a legacy one) through, and what stops it. For an HTTP
// upstream of the modern era it returns nil: the proxy's own transport.
func (c *upstreamConfig) upstreamTransport(ctx context.Context, log *slog.Logger, guard *mrtr.Guard) (http.RoundTripper, func(context.Context) error, error) {
	if len(c.command) == 0 {
		if c.era == eraLegacy {
			return nil, nil, flagErr("upstream-era", "legacy is bridged for a command upstream (mrtr proxy [flags] -- COMMAND [ARG...]); a 2025-11-25 upstream over HTTP is passed through for 2025-11-25 clients only")
		}
		return nil, nil, nil
	}
	if _, err := stdio.Environ(nil, c.env); err != nil {
		return nil, nil, flagErr("upstream-env", "%v", err)
	}
	name := commandName(c.command)
	childLog := log.With("upstream", name)
	dial := func(context.Context) (bridge.Upstream, error) {
		ch, err := stdio.Start(stdio.Config{Path: c.command[0], Args: c.command[1:], Env: c.env, Logger: childLog})
		if err != nil {
			return nil, err
		}
		childLog.Debug("bridge: upstream process started", "pid", ch.Pid())
		return childUpstream{ch}, nil
	}
	era := c.era
	if era == eraAuto {
		var err error
		if era, err = probeStdio(ctx, dial, childLog); err != nil {
			return nil, nil, err
		}
	}
	if era == eraModern {
		log.Info("mrtr proxy: the upstream speaks 2026-07-28: its pauses are sealed; 2026-07-28 clients share one process, their ids and progress tokens remapped; each 2025-11-25 client session gets a process of its own",
			"upstream", name, "era", era)
		d := bridge.NewDirectWith(bridge.DirectOptions{Dial: dial, Logger: childLog, MaxProcs: c.maxProcs})
		c.instrument(d.Ready, func() (procs, idle, holds int) {
			if d.Running() {
				procs = 1
			}
			return procs, 0, 0
		})
		return d, d.Close, nil
	}
	p := guard.Policy()
	lee := max(p.Leeway, 0)
	b := bridge.New(bridge.Options{
		Dial:             dial,
		Roots:            c.roots,
		MaxSessions:      c.maxProcs,
		MaxHolds:         c.maxHolds,
		HoldTTL:          p.TTL + 2*lee,
		AnonymousHoldTTL: p.AnonymousTTL + 2*lee,
		ClientName:       "mrtr-proxy",
		ClientVersion:    version,
		Logger:           childLog,
	})
	c.instrument(b.Ready, func() (procs, idle, holds int) {
		st := b.Stats()
		return st.Sessions, st.Idle, st.Holds
	})
	log.Info("mrtr proxy: the upstream speaks 2025-11-25: 2026-07-28 calls are bridged, its mid-call elicitation, sampling and roots requests become sealed input_required rounds; one process per caller and call",
		"upstream", name, "era", era, "max_procs", c.maxProcs, "max_holds", c.maxHolds, "roots", len(c.roots))
	return b, b.Close, nil
}

// probeTimeout bounds the era probe of a command upstream, start-up
// included (npx may fetch the package first).
const probeTimeout = 90 * time.Second

// probeStdio tells a command upstream's era the way the spec's client era
// detection does on stdio: a server/discover request; a DiscoverResult
// listing 2026-07-28 means modern, anything else (an error, no answer in
// time, a closed stdout) legacy. The probe's process is stopped.
func probeStdio(ctx context.Context, dial func(context.Context) (bridge.Upstream, error), log *slog.Logger) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	up, err := dial(ctx)
	if err != nil {
		return "", fmt.Errorf("start the upstream: %w", err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = up.Close(sctx)
	}()
	conn := rpc.NewConn(up, nil)
	params, _ := json.Marshal(map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    bridge.ModernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "mrtr-proxy", "version": version},
	}})
	m, err := conn.Call(ctx, "server/discover", params)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Info("mrtr proxy: the upstream ended its output before answering server/discover: taking it as 2025-11-25", "error", err)
		return eraLegacy, nil
	case err != nil:
		log.Info("mrtr proxy: no answer to server/discover: taking the upstream as 2025-11-25", "waited", probeTimeout)
		return eraLegacy, nil
	case m.Error != nil:
		return eraLegacy, nil
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(m.Result, &res) == nil {
		for _, v := range res.SupportedVersions {
			if v == bridge.ModernVersion {
				return eraModern, nil
			}
		}
	}
	log.Info("mrtr proxy: server/discover does not list 2026-07-28: taking the upstream as 2025-11-25", "versions", strings.Join(res.SupportedVersions, ","))
	return eraLegacy, nil
}
