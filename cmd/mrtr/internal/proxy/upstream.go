package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/internal/runner"
	"github.com/mrtr-go/mrtr/internal/stdio"
	"github.com/mrtr-go/mrtr/internal/supervise"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
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

// UpstreamConfig is what `mrtr proxy` knows of an upstream that is a
// command, or that may speak 2025-11-25 only.
type UpstreamConfig struct {
	obs     *node.Telemetry // set by the proxy: where /readyz and /metrics learn of the upstream
	Command []string        // after --; empty for --upstream URL
	runner  string          // --runner SOCKET: every child is a connection to mrtr runner (runnerdial.go)
	era     string
	env     []string // --upstream-env K=V
	user    string   // --upstream-user USER[:GROUP]; empty: the proxy's user
	roots   []string // --roots URI
	// rootsFromClient is --roots-from-client: callers answer a legacy
	// upstream's roots/list during their calls.
	rootsFromClient bool
	maxProcs        int
	maxHolds        int
	// maxProcsPerCaller is --max-procs-per-caller; zero: PerCaller's
	// default. warm is --warm.
	maxProcsPerCaller int
	warm              int
	node              string // this process among its replicas; empty: none (no Redis store)
	// url and dialTimeout are --upstream and --upstream-dial-timeout, set
	// by the proxy command: an HTTP upstream's era is probed, and a legacy
	// one bridged, with the proxy's own dial settings.
	url         string
	dialTimeout time.Duration
	// probeTimeout bounds the era probe of a command upstream; zero means
	// defaultProbeTimeout (a test seam, no flag).
	probeTimeout time.Duration
	// late is set by httpTransport for an HTTP upstream that did not
	// answer its era probe at start: the proxy serves /mcp through it,
	// and it binds the right path once the upstream answers.
	late *lateEra
	// bound is the bridge (or Direct) in use, once known: the drain asks
	// it how many calls it holds; a late-bound one's readiness too.
	bound struct {
		ready atomic.Pointer[func(context.Context) error]
		stats atomic.Pointer[func() bridge.Stats]
	}
}

// heldCalls counts the calls the upstream's bridge holds for a client's
// answers: what a drain waits for besides the requests in flight.
func (c *UpstreamConfig) heldCalls() int {
	if s := c.bound.stats.Load(); s != nil {
		return (*s)().Holds
	}
	return 0
}

// upstreamFlags registers the flags of UpstreamConfig.
func upstreamFlags(f *base.Flags, c *UpstreamConfig) {
	f.Choice(base.GroupUpstream, &c.era, "upstream-era", eraAuto, []string{eraAuto, eraModern, eraLegacy},
		"the protocol generation the upstream speaks: auto (probe it: server/discover on stdio, a 2026-07-28 request over HTTP), modern (2026-07-28) or legacy (2025-11-25: its mid-call elicitation, sampling and roots requests become sealed rounds)")
	f.List(base.GroupUpstream, &c.env, "upstream-env", "\n", "`K=V` added to a command upstream's environment (repeatable; the variable: one per line); the proxy's MRTR_* variables never reach it")
	upstreamUserFlag(f, c)
	f.List(base.GroupUpstream, &c.roots, "roots", ",", "`URI` of a root the proxy answers every roots/list of a legacy upstream with, in a call or outside one (repeatable; the variable: comma-separated); none: an empty list. Callers are never asked, unless --roots-from-client")
	f.Bool(base.GroupUpstream, &c.rootsFromClient, "roots-from-client", false,
		"let callers answer a legacy upstream's roots/list during their calls, as a sealed round (their answer becomes what the upstream may touch, for the rest of its session): only for callers on the upstream's own machine")
	f.Int(base.GroupLimits, &c.maxProcs, "max-procs", bridge.DefaultMaxSessions, 1,
		"most upstream processes (legacy sessions on HTTP) open at once; a call needing one more gets an error")
	f.Int(base.GroupLimits, &c.maxHolds, "max-holds", bridge.DefaultMaxHolds, 1,
		"most legacy calls held waiting for a client's answers; a call that would pause beyond it gets an error")
	f.Int(base.GroupLimits, &c.maxProcsPerCaller, "max-procs-per-caller", 0, 0,
		"most upstream processes, and so held calls, of one caller (all anonymous callers together are one); at it the caller's least recently used idle one is stopped, else its call gets an error. 0: a quarter of --max-procs, at least 1")
	f.Int(base.GroupLimits, &c.warm, "warm", 0, 0,
		"initialized processes of a 2025-11-25 command upstream kept ready for no caller yet, so that a call does not wait for a start (each one belongs to the first caller that uses it); they count against --max-procs, not against any caller")
}

// perCaller is --max-procs-per-caller, its default applied.
func (c *UpstreamConfig) perCaller() int {
	if c.maxProcsPerCaller > 0 {
		return c.maxProcsPerCaller
	}
	return bridge.DefaultPerCaller(c.maxProcs)
}

// addCrashLoopCheck adds to /readyz a command upstream whose starts keep
// failing: "crash_loop" while it is in one (its exit status and the end
// of its stderr go to the log, never to the unauthenticated reader of
// /readyz).
func (c *UpstreamConfig) addCrashLoopCheck(check func(context.Context) error) {
	if c.obs == nil {
		return
	}
	c.obs.Health.Checks = append(c.obs.Health.Checks, observe.Check{Name: "upstream_starts", Fn: func(ctx context.Context) error {
		if err := check(ctx); err != nil {
			return &observe.CheckError{Status: "crash_loop", Err: err}
		}
		return nil
	}})
}

// instrument adds the command upstream to /readyz (unready while it
// cannot be started) and to /metrics: the processes running, the idle
// ones among them and the calls held for an answer.
func (c *UpstreamConfig) instrument(ready func(context.Context) error, stats func() bridge.Stats) {
	c.bound.stats.Store(&stats)
	c.bound.ready.Store(&ready)
	if c.obs == nil {
		return
	}
	if c.late == nil { // a late one's check, registered at start, reads c.bound
		c.obs.Health.Checks = append(c.obs.Health.Checks, observe.Check{Name: "upstream", Fn: ready})
	}
	if c.obs.Registry == nil {
		return
	}
	for _, g := range []struct {
		name, help string
		v          func() int
	}{
		{"mrtr_upstream_processes", "Upstream processes running (a command upstream's children).", func() int { return stats().Sessions }},
		{"mrtr_upstream_processes_idle", "Upstream processes idle, kept for their caller's next call.", func() int { return stats().Idle }},
		{"mrtr_bridge_held_calls", "Calls of a 2025-11-25 upstream held for a client's answers.", func() int { return stats().Holds }},
		{"mrtr_upstream_processes_warm", "Upstream processes initialized for no caller yet (--warm), not among the idle.", func() int { return stats().Warm }},
	} {
		_ = c.obs.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 { return float64(g.v()) }))
	}
	for _, l := range []struct {
		limit string
		n     func(bridge.Refusals) int64
	}{
		{"procs", func(r bridge.Refusals) int64 { return r.Procs }},
		{"per_caller", func(r bridge.Refusals) int64 { return r.PerCaller }},
		{"holds", func(r bridge.Refusals) int64 { return r.Holds }},
	} {
		_ = c.obs.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mrtr_bridge_refused_total",
			Help:        "Calls refused at a limit: procs (--max-procs), per_caller (--max-procs-per-caller), holds (--max-holds).",
			ConstLabels: prometheus.Labels{"limit": l.limit},
		}, func() float64 { return float64(l.n(stats().Refused)) }))
	}
	_ = c.obs.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mrtr_upstream_notifications_dropped_total",
		Help: "Progress and log notifications of the upstream dropped because the queue of the call (or 2025-11-25 session) they were for was full.",
	}, func() float64 { return float64(stats().Dropped) }))
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

// upstreamTransport returns the transport the proxy reaches a command
// upstream (or a legacy one) through, and what stops it. For an HTTP
// upstream of the modern era it returns nil: the proxy's own transport.
func (c *UpstreamConfig) upstreamTransport(ctx context.Context, log *slog.Logger, guard *mrtr.Guard) (http.RoundTripper, func(context.Context) error, error) {
	if len(c.Command) == 0 && c.runner == "" {
		return c.httpTransport(ctx, log, guard)
	}
	name, childLog, dial, err := c.childDial(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	era := c.era
	var first bridge.Upstream // the probe's process: it serves the first call
	if era == eraAuto {
		var err error
		if era, first, err = probeStdio(ctx, dial, childLog, name, c.probeTimeout, 0); err != nil {
			return nil, nil, err
		}
	}
	if era == eraModern {
		log.Info("mrtr proxy: the upstream speaks 2026-07-28: its pauses are sealed; 2026-07-28 clients share one process, their ids and progress tokens remapped; each 2025-11-25 client session gets a process of its own",
			"upstream", name, "era", era)
		d := bridge.NewDirectWith(bridge.DirectOptions{Dial: dial, Logger: childLog, MaxProcs: c.maxProcs, MaxProcsPerCaller: c.perCaller(),
			First: first, CrashLoop: bridge.DefaultCrashLoop, Roots: c.roots, RootsFromClient: c.rootsFromClient})
		c.instrument(d.Ready, d.Stats) // the shared child and 2025-11-25 clients' children
		c.addCrashLoopCheck(d.CrashLoop)
		return d, d.Close, nil
	}
	b := c.newBridge(guard, dial, nil, childLog, commandPool{first: first, warm: c.warm})
	log.Info("mrtr proxy: the upstream speaks 2025-11-25: 2026-07-28 calls are bridged, its mid-call elicitation, sampling and roots requests become sealed input_required rounds; one process per caller and call",
		"upstream", name, "era", era, "max_procs", c.maxProcs, "max_procs_per_caller", c.perCaller(), "max_holds", c.maxHolds, "warm", c.warm,
		"roots", len(c.roots), "roots_from_client", c.rootsFromClient)
	return b, b.Close, nil
}

// childDial returns how the proxy starts a child of a command upstream:
// a process of its own, or with --runner a connection to the runner
// (runnerDial). name is how logs name the upstream; log is the child's.
func (c *UpstreamConfig) childDial(ctx context.Context, log *slog.Logger) (string, *slog.Logger, func(context.Context) (bridge.Upstream, error), error) {
	if c.runner != "" {
		return c.runnerDial(ctx, log)
	}
	if _, err := stdio.Environ(nil, c.env); err != nil {
		return "", nil, nil, base.FlagErr("upstream-env", "%v", err)
	}
	user, err := upstreamUser(c.user, log)
	if err != nil {
		return "", nil, nil, err
	}
	name := base.CommandName(c.Command)
	childLog := log.With("upstream", name)
	supervisor := supervise.Argv() // what the command starts dies with the proxy (Linux)
	dial := func(context.Context) (bridge.Upstream, error) {
		ch, err := stdio.Start(stdio.Config{Path: c.Command[0], Args: c.Command[1:], Env: c.env, User: user, Supervisor: supervisor, Logger: childLog})
		if err != nil {
			return nil, err
		}
		childLog.Debug("bridge: upstream process started", "pid", ch.Pid())
		return childUpstream{ch}, nil
	}
	return name, childLog, dial, nil
}

// commandPool is what a bridge in front of a command has that one in
// front of an HTTP upstream has not: the era probe's process, warm
// children, and restarts that back off in a crash loop.
type commandPool struct {
	first bridge.Upstream
	warm  int
}

// newBridge is the bridge in front of a legacy upstream reached by dial;
// passthrough carries older clients' own traffic (HTTP upstreams only);
// pool is nil for an HTTP upstream.
func (c *UpstreamConfig) newBridge(guard *mrtr.Guard, dial func(context.Context) (bridge.Upstream, error), passthrough http.RoundTripper, log *slog.Logger, pool ...commandPool) *bridge.Bridge {
	p := guard.Policy()
	lee := max(p.Leeway, 0)
	var cp commandPool
	crashLoop := 0
	if len(pool) > 0 {
		cp, crashLoop = pool[0], bridge.DefaultCrashLoop
	}
	b := bridge.New(bridge.Options{
		Dial:                 dial,
		First:                cp.first,
		Warm:                 cp.warm,
		CrashLoop:            crashLoop,
		Roots:                c.roots,
		RootsFromClient:      c.rootsFromClient,
		MaxSessions:          c.maxProcs,
		MaxSessionsPerCaller: c.perCaller(),
		MaxHolds:             c.maxHolds,
		HoldTTL:              p.TTL + 2*lee,
		AnonymousHoldTTL:     p.AnonymousTTL + 2*lee,
		ClientName:           "mrtr-proxy",
		ClientVersion:        base.Version,
		Logger:               log,
		Passthrough:          passthrough,
		Node:                 c.node,
	})
	c.instrument(b.Ready, b.Stats)
	if crashLoop > 0 {
		c.addCrashLoopCheck(b.CrashLoop)
	}
	return b
}

// httpTransport is UpstreamTransport for --upstream URL: nil (the proxy's
// own transport) for a modern upstream; for a legacy one a bridge whose
// sessions are 2025-11-25 Streamable HTTP sessions with the upstream, and
// which passes 2025-11-25 clients' own traffic straight through.
func (c *UpstreamConfig) httpTransport(ctx context.Context, log *slog.Logger, guard *mrtr.Guard) (http.RoundTripper, func(context.Context) error, error) {
	name := upstreamShown(c.url) // audit.go: no userinfo, query or fragment
	tr := upstreamHTTPTransport(c.dialTimeout)
	era := c.era
	if era == eraAuto {
		var err error
		era, err = c.judgeHTTP(ctx, log, tr, name)
		if err != nil {
			// Not up yet (the start race of compose or Kubernetes): judged
			// as soon as it answers; until then /readyz is 503 and calls
			// wait for it, briefly.
			c.late = newLateEra(log, name, func(ctx context.Context) (string, error) { return c.judgeHTTP(ctx, log, tr, name) })
			log.Warn("mrtr proxy: the upstream does not answer yet: /readyz answers 503 and calls wait for it (then get an error) until it does; its era is judged as soon as it answers",
				"upstream", name, "error", err, "call_wait", c.late.wait)
			return nil, c.late.close, nil
		}
	}
	if era == eraModern {
		logModernHTTP(log, name)
		return nil, nil, nil
	}
	b := c.httpBridge(guard, log, tr, name)
	return b, b.Close, nil
}

// logModernHTTP says that an HTTP upstream is modern.
func logModernHTTP(log *slog.Logger, name string) {
	log.Info("mrtr proxy: the upstream speaks 2026-07-28: its pauses are sealed", "upstream", name, "era", eraModern)
}

// judgeHTTP is probeHTTP, but an upstream that answers only with a
// request for credentials is taken as modern, with a warning: its era
// cannot be told without them (--upstream-era legacy bridges a
// 2025-11-25 one). An error means it did not answer (or failed).
func (c *UpstreamConfig) judgeHTTP(ctx context.Context, log *slog.Logger, tr http.RoundTripper, name string) (string, error) {
	era, err := probeHTTP(ctx, tr, c.url)
	if errors.Is(err, errNeedsCredentials) {
		log.Warn("mrtr proxy: the upstream's era could not be told: taking it as 2026-07-28 (--upstream-era legacy bridges a 2025-11-25 one)",
			"upstream", name, "error", err)
		return eraModern, nil
	}
	return era, err
}

// httpBridge is the bridge in front of a legacy HTTP upstream: its
// sessions are 2025-11-25 Streamable HTTP sessions with the upstream, and
// it passes 2025-11-25 clients' own traffic straight through (over tr).
func (c *UpstreamConfig) httpBridge(guard *mrtr.Guard, log *slog.Logger, tr http.RoundTripper, name string) *bridge.Bridge {
	upLog := log.With("upstream", name)
	dial := func(context.Context) (bridge.Upstream, error) {
		return bridge.NewHTTPSession(bridge.HTTPOptions{URL: c.url, Transport: tr, Logger: upLog}), nil
	}
	b := c.newBridge(guard, dial, tr, upLog)
	log.Info("mrtr proxy: the upstream speaks 2025-11-25: 2026-07-28 calls are bridged, its mid-call elicitation, sampling and roots requests become sealed input_required rounds; one upstream session per caller and call; 2025-11-25 clients are passed through",
		"upstream", name, "era", eraLegacy, "max_procs", c.maxProcs, "max_holds", c.maxHolds, "roots", len(c.roots), "roots_from_client", c.rootsFromClient)
	return b
}

// upstreamHTTPTransport is the proxy's transport to an HTTP upstream
// (proxy.New's default): dials bounded by dialTimeout, many idle
// connections kept.
func upstreamHTTPTransport(dialTimeout time.Duration) *http.Transport {
	if dialTimeout <= 0 {
		dialTimeout = mrtrproxy.DefaultDialTimeout
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = 256
	return t
}

// probeHTTPTimeout bounds the era probe of an HTTP upstream.
const probeHTTPTimeout = 30 * time.Second

// errNeedsCredentials is probeHTTP's error for an upstream that answers
// 401 or 403.
var errNeedsCredentials = errors.New("it needs credentials")

// probeHTTP tells an HTTP upstream's era the way the spec's client era
// detection does on HTTP: a modern request (server/discover with the
// 2026-07-28 _meta and headers). A result (a DiscoverResult, unless its
// supportedVersions lack 2026-07-28), or a 4xx whose body is a modern
// error (-32020, -32021, -32022, or -32601 with 404), means modern;
// anything else legacy. A -32022 whose data.supported lists only older
// versions is a legacy server's answer (go-sdk's stateful server gives
// it): legacy. An error means the answer tells nothing: the upstream
// could not be reached, wants credentials (401, 403) or failed (5xx).
func probeHTTP(ctx context.Context, tr http.RoundTripper, target string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeHTTPTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    bridge.ModernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "mrtr-proxy", "version": base.Version},
	}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", bridge.ModernVersion)
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// Says nothing of the era: the proxy's own request carries no
		// client's credentials.
		return "", fmt.Errorf("the upstream answered HTTP %d: %w", resp.StatusCode, errNeedsCredentials)
	case resp.StatusCode >= 500:
		return "", fmt.Errorf("the upstream answered HTTP %d", resp.StatusCode)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
		for l := range bytes.SplitSeq(raw, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(l, "\r"), []byte("data:")); ok {
				raw = bytes.TrimSpace(d)
				break
			}
		}
	}
	var m struct {
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &m) != nil {
		if resp.StatusCode == http.StatusNotFound {
			// No MCP server answers a 404 without a JSON-RPC body: most
			// likely the URL's path is wrong (a forgotten /mcp), which
			// says nothing of the era.
			return "", fmt.Errorf("the upstream answered HTTP 404 without a JSON-RPC body (is the path of --upstream right, e.g. /mcp?)")
		}
		return eraLegacy, nil
	}
	switch {
	case resp.StatusCode/100 == 2 && m.Result != nil:
		// A 2025-11-25 server answers nothing before initialize; one that
		// answers is modern unless it names only older versions.
		if m.Result.SupportedVersions == nil || slices.Contains(m.Result.SupportedVersions, bridge.ModernVersion) {
			return eraModern, nil
		}
	case resp.StatusCode/100 == 4 && m.Error != nil:
		switch m.Error.Code {
		case -32020, -32021:
			return eraModern, nil
		case -32022:
			if len(m.Error.Data.Supported) == 0 || slices.Contains(m.Error.Data.Supported, bridge.ModernVersion) {
				return eraModern, nil
			}
		case -32601:
			if resp.StatusCode == http.StatusNotFound {
				return eraModern, nil
			}
		}
	}
	return eraLegacy, nil
}

// defaultProbeTimeout bounds the era probe of a command upstream, start-up
// included (npx may fetch the package first).
const defaultProbeTimeout = 90 * time.Second

// defaultProbeLogEvery is how often the probe says it is still waiting.
const defaultProbeLogEvery = 10 * time.Second

// probeStdio tells a command upstream's era the way the spec's client era
// detection does on stdio: a server/discover request; a DiscoverResult
// listing 2026-07-28 means modern, an error result, no answer within
// timeout (zero: defaultProbeTimeout) or one not listing it legacy. A
// command that ends its output before answering (it exited, most often:
// a missing configuration, a bad argument) is an error naming its exit
// status and the end of its stderr: the proxy stops rather than serve a
// command that cannot run. While it waits, it says so in the log, at
// once and every logEvery (zero: defaultProbeLogEvery), with the time
// left. A process that answered is returned, to serve the first call
// (nothing else read from it yet); one that did not is stopped.
func probeStdio(ctx context.Context, dial func(context.Context) (bridge.Upstream, error), log *slog.Logger, name string, timeout, logEvery time.Duration) (string, bridge.Upstream, error) {
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	if logEvery <= 0 {
		logEvery = defaultProbeLogEvery
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	up, err := dial(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("start the upstream: %w", err)
	}
	stop := func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = up.Close(sctx)
	}
	params, _ := json.Marshal(map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    bridge.ModernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]string{"name": "mrtr-proxy", "version": base.Version},
	}})
	answered := make(chan struct{})
	waitLogged := make(chan struct{})
	go func() {
		defer close(waitLogged)
		start := time.Now()
		tick := time.NewTicker(logEvery)
		defer tick.Stop()
		for {
			waited := time.Since(start)
			log.Info("mrtr proxy: waiting for the upstream command to answer server/discover",
				"command", name, "waited", waited.Round(time.Second), "left", (timeout - waited).Round(time.Second))
			select {
			case <-answered:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	m, err := discoverOn(ctx, up, params)
	close(answered)
	<-waitLogged
	switch {
	case err != nil && ctx.Err() == nil:
		stop() // reaped: how it ended is known
		return "", nil, endedEarly(name, up, err)
	case err != nil:
		stop() // its state is unknown: a fresh one serves the calls
		log.Info("mrtr proxy: no answer to server/discover: taking the upstream as 2025-11-25", "command", name, "waited", timeout)
		return eraLegacy, nil, nil
	case m.Error != nil:
		return eraLegacy, up, nil
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(m.Result, &res) == nil {
		for _, v := range res.SupportedVersions {
			if v == bridge.ModernVersion {
				return eraModern, up, nil
			}
		}
	}
	log.Info("mrtr proxy: server/discover does not list 2026-07-28: taking the upstream as 2025-11-25", "versions", strings.Join(res.SupportedVersions, ","))
	return eraLegacy, up, nil
}

// discoverID is the id of the probe's server/discover: a string, so it is
// none of the numbers the connection that takes the process over uses.
const discoverID = `"mrtr-discover"`

// discoverOn sends server/discover with params on up and reads up to its
// response, and no further: the process, handed over, has nothing of its
// own consumed. A request the command sends meanwhile is refused;
// rpc.ErrClosed when its output ends first.
func discoverOn(ctx context.Context, up bridge.Upstream, params json.RawMessage) (*rpc.Message, error) {
	req, err := (&rpc.Message{ID: json.RawMessage(discoverID), Method: "server/discover", Params: params}).Encode()
	if err != nil {
		return nil, err
	}
	if err := up.Send(req); err != nil {
		return nil, fmt.Errorf("%w: %w", rpc.ErrClosed, err)
	}
	for {
		select {
		case b, ok := <-up.Recv():
			if !ok {
				return nil, rpc.ErrClosed
			}
			m, err := rpc.Parse(b)
			switch {
			case err != nil:
			case m.Method == "" && string(m.ID) == discoverID:
				return m, nil
			case m.IsRequest():
				if out, err := (&rpc.Message{ID: m.ID, Error: json.RawMessage(`{"code":-32601,"message":"method not found: the client is not initialized"}`)}).Encode(); err == nil {
					_ = up.Send(out)
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// endedEarly is the error of a command upstream whose output ended before
// it answered the probe: its exit status (or signal) and the end of its
// stderr, once it is reaped. callErr is the probe's own error, for an
// upstream that is not a child.
func endedEarly(name string, up bridge.Upstream, callErr error) error {
	if rc, ok := up.(*runner.Conn); ok {
		return fmt.Errorf("the runner at %s closed the connection before its child answered server/discover (the runner's log says how the child ended): %w", rc.Path(), callErr)
	}
	ch, ok := up.(childUpstream)
	if !ok {
		return fmt.Errorf("the upstream command %s ended its output before answering server/discover: %w", name, callErr)
	}
	return fmt.Errorf("the upstream command %s ended before answering server/discover (%s)%s", name, exitStatus(ch.Err()), stderrTail(ch.StderrTail()))
}

// exitStatus says how a reaped child ended: "exit status N" or "signal:
// S" (or, for a child stopped for a protocol error, why).
func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	default:
		return err.Error()
	}
}

// stderrTail formats the end of a child's stderr (stdio.Child.StderrTail)
// for an error or a log: one indented line each.
func stderrTail(lines []string) string {
	if len(lines) == 0 {
		return "; it wrote nothing on stderr"
	}
	return "; the end of its stderr:\n\t" + strings.Join(lines, "\n\t")
}
