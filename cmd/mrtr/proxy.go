package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

// proxyConfig is commonConfig plus the flags only `mrtr proxy` has.
type proxyConfig struct {
	commonConfig
	upstream        string
	upstreamTimeout time.Duration
	dialTimeout     time.Duration
	upTransport     string // --upstream-transport
	maxHeld         int64
	maxState        int64
	forwardAuth     bool
	advertise       string // --advertise; empty: http://ADDR/mcp
	upstreamConfig
}

// proxyAbout is the paragraph of `mrtr proxy --help`.
const proxyAbout = `Puts mrtr in front of an MCP server written in any language (the upstream, reached over Streamable HTTP at --upstream URL, or a command run after -- and spoken to over stdio): serves http://ADDR/mcp (--addr, default 127.0.0.1:8080) and behaves exactly like the upstream, except that every input_required result leaves with its requestState sealed by the --keys ring, and every retry is checked before it reaches the upstream. ` +
	`/healthz answers while the process serves, /readyz while the keys, the store and the upstream are usable. ` +
	`Every flag can also be given as the MRTR_* variable shown; a flag wins over its variable.`

// proxyExamples end `mrtr proxy --help`.
const proxyExamples = `  mrtr proxy --upstream http://127.0.0.1:3000/mcp --addr 127.0.0.1:8081
  mrtr proxy --addr 127.0.0.1:8082 -- npx -y @modelcontextprotocol/server-everything
  mrtr proxy --roots file:///srv/data -- npx -y @modelcontextprotocol/server-filesystem /srv/data
  mrtr proxy --keys keys.json --replay redis://10.0.0.9:6379/0 --addr 0.0.0.0:8080 \
      --advertise http://10.0.0.5:8080/mcp -- npx -y @modelcontextprotocol/server-everything
`

// proxyFlags registers the flags of `mrtr proxy`.
func proxyFlags(f *flags, c *proxyConfig) {
	commonFlags(f, &c.commonConfig)
	f.String(groupUpstream, &c.upstream, "upstream", "", "`URL` of the upstream MCP server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3000/mcp (required unless a command follows --)")
	f.check("upstream", func() error {
		u, err := url.Parse(c.upstream)
		switch {
		case len(c.command) > 0 && c.upstream != "":
			return flagErr("upstream", "and a command after -- both name an upstream: give one")
		case c.runner != "" && c.upstream != "":
			return flagErr("runner", "and --upstream both name an upstream: give one")
		case c.runner != "" && len(c.command) > 0:
			return flagErr("runner", "and a command after -- both name an upstream: the command is the runner's (mrtr runner ... -- COMMAND)")
		case len(c.command) > 0 || c.runner != "":
			return nil
		case c.upstream == "":
			return flagErr("upstream", "is required (the URL of the MCP server to put mrtr in front of), or a command after --: mrtr proxy [flags] -- npx -y PACKAGE")
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return flagErr("upstream", "%s is not an http:// or https:// URL", redactURL(c.upstream))
		}
		return nil
	})
	runnerFlag(f, &c.upstreamConfig)
	f.Duration(groupUpstream, &c.upstreamTimeout, "upstream-timeout", proxy.DefaultUpstreamTimeout,
		"longest wait for the upstream's answer to one request (GET streams and subscriptions/listen are not limited)")
	f.Duration(groupUpstream, &c.dialTimeout, "upstream-dial-timeout", proxy.DefaultDialTimeout, "longest wait to connect to the upstream")
	f.Choice(groupUpstream, &c.upTransport, "upstream-transport", defaultUpstreamTransport(), []string{string(proxy.TransportStd), string(proxy.TransportLean)},
		"transport to an HTTP upstream: lean (the proxy's own HTTP/1.1 transport for POSTs up to 256 KiB, less CPU; the default where the system can peek at a socket, as Linux, macOS and the BSDs can) or std (Go's net/http transport for every request; the default elsewhere)")
	f.check("upstream-transport", func() error {
		if c.upTransport == string(proxy.TransportLean) && !proxy.LeanTransportSupported {
			return flagErr("upstream-transport", "lean needs a non-blocking socket peek, which %s lacks: use std", runtime.GOOS)
		}
		return nil
	})
	f.Size(groupLimits, &c.maxHeld, "max-held", proxy.DefaultMaxHeldBytes, 1024,
		"largest final message of a pausable call the proxy holds to seal it (notifications before it are streamed, never held); larger is a -32603 error")
	f.Size(groupLimits, &c.maxState, "max-upstream-state", proxy.DefaultMaxUpstreamState, 16,
		"largest upstream requestState carried in a sealed token (its JSON string); larger is a -32603 error naming the limit, never truncated")
	f.Bool(groupUpstream, &c.forwardAuth, "forward-authorization", false,
		"pass the client's Authorization header to the upstream (off: tokens issued to the proxy are not passed through)")
	upstreamFlags(f, &c.upstreamConfig)
	replicaFlags(f, c)
}

// defaultUpstreamTransport is --upstream-transport's default: lean where
// it can run.
func defaultUpstreamTransport() string {
	if proxy.LeanTransportSupported {
		return string(proxy.TransportLean)
	}
	return string(proxy.TransportStd)
}

// parseProxy reads flags over environment variables over defaults.
func (a *app) parseProxy(args []string) (*proxyConfig, error) {
	c := new(proxyConfig)
	f := a.newFlags("proxy", "mrtr proxy --upstream URL [flags]\n       mrtr proxy [flags] -- COMMAND [ARG...]\n       mrtr proxy --runner SOCKET [flags]", proxyAbout)
	f.examples = proxyExamples
	proxyFlags(f, c)
	if i := slices.Index(args, "--"); i >= 0 { // the upstream command, run as is: never parsed as flags
		c.command, args = args[i+1:], args[:i]
		if len(c.command) == 0 {
			return nil, flagErr("upstream", "-- must be followed by the command that runs the upstream")
		}
	}
	if err := f.parse(a.getenv, args); err != nil {
		return nil, err
	}
	c.commonConfig.settle()
	c.getenv = a.getenv
	c.drainConfig.signal = a.drain
	return c, nil
}

// proxy runs the sealing proxy in front of --upstream.
func (a *app) proxy(ctx context.Context, args []string) error {
	c, err := a.parseProxy(args)
	if err != nil {
		return err
	}
	if err := checkCommand(c.command); err != nil { // before the key ring's warning and the policy
		return err
	}
	if err := undumpable(); err != nil { // before any child: they must not read $MRTR_KEYS in /proc
		return err
	}
	log := c.logger(a.stderr, slog.LevelDebug)
	// A drain names the flows it waits for (drain.go).
	c.drainConfig.flows = newFlowTracker()
	c.audit.upstream = auditUpstream(c) // audit lines name the upstream (audit.go)
	guard, closeGuard, err := c.newGuard(ctx, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	c.drainConfig.flows.setTTL(guard.Policy())
	stopMetrics, err := c.startMetrics(log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	hosts := c.allowedHostList()
	c.upstreamConfig.url, c.upstreamConfig.dialTimeout = c.upstream, c.dialTimeout
	c.upstreamConfig.obs = c.commonConfig.tel
	c.upstreamConfig.probeTimeout = a.probeTimeout
	// Replicas share a Redis store; a bridge names this process (its
	// node) in every held call's state.
	replicas := newReplicaSet(c.redisStore)
	if replicas != nil {
		c.upstreamConfig.node = replicas.node
	}
	// The waits of the start (the era probe) end at the first signal.
	pctx, cancelStart := a.untilDrain(ctx)
	defer cancelStart()
	tr, stopUpstream, err := c.upstreamTransport(pctx, log, guard)
	if err != nil {
		return err
	}
	if stopUpstream != nil {
		defer func() {
			sctx, cancel := c.drainConfig.upstreamStopContext(15 * time.Second)
			defer cancel()
			_ = stopUpstream(sctx)
		}()
	}
	c.drainConfig.held = c.upstreamConfig.heldCalls
	late := c.upstreamConfig.late // an HTTP upstream not up yet (lateera.go)
	upstream, upstreamName := c.upstream, c.upstream
	if len(c.command) > 0 {
		upstream, upstreamName = stdioUpstreamURL, "command "+commandName(c.command)
	} else if c.runner != "" {
		upstream, upstreamName = stdioUpstreamURL, "runner "+c.runner
	} else {
		upstreamName = upstreamShown(c.upstream) // audit.go: no userinfo, query or fragment
	}
	var peersOpt *proxy.Peers
	if _, bridged := tr.(*bridge.Bridge); bridged && replicas != nil {
		if err := checkAdvertise(c.addr, c.advertise); err != nil {
			return err
		}
		if w := loopbackAdvertise(c.addr, c.advertise); w != "" {
			log.Warn(w, "addr", c.addr)
		}
		peersOpt = replicas.peersOf(c.codec, guard, c.tel.observer)
		c.onListen = func(a net.Addr) error {
			return replicas.start(ctx, log, advertiseURL(c.addr, c.advertise, a), c.codec, guard.Policy().ServerID)
		}
		defer replicas.stop()
	} else if late != nil && replicas != nil {
		defer func() { // started if the upstream turns out 2025-11-25
			late.halt()
			replicas.stop()
		}()
	} else if c.advertise != "" {
		log.Warn(advertiseIgnored)
	}
	opts := proxy.Options{
		Upstream:             upstream,
		Transport:            tr,
		Guard:                guard,
		DialTimeout:          c.dialTimeout,
		UpstreamTransport:    proxy.TransportKind(c.upTransport),
		UpstreamTimeout:      c.upstreamTimeout,
		MaxBodyBytes:         c.maxBodyBytes,
		MaxHeldBytes:         c.maxHeld,
		MaxUpstreamState:     int(c.maxState),
		Principal:            bearerPrincipal,
		ForwardAuthorization: c.forwardAuth,
		AllowedHosts:         hosts,
		Logger:               log,
		Peers:                peersOpt,
	}
	h, err := proxy.New(opts)
	if err != nil {
		return err
	}
	var endpoint http.Handler = h
	if peersOpt != nil {
		endpoint = replicas.tagForwarded(h) // audit lines name the replica that forwarded a resume (replicas.go)
	}
	if late != nil {
		c.bindLate(ctx, log, guard, h, opts, replicas)
		endpoint = late
	} else if len(c.command) == 0 && c.runner == "" {
		// Not fatal: the upstream may start after the proxy. (A command
		// upstream has its own readiness check, added by upstreamTransport.)
		cctx, cancel := context.WithTimeout(ctx, c.dialTimeout+2*time.Second)
		if err := h.CheckUpstream(cctx); err != nil {
			log.Warn("mrtr proxy: the upstream does not serve MCP yet; calls fail until it does", "upstream", upstreamShown(c.upstream), "error", err)
		}
		cancel()
		c.tel.addUpstreamReadiness(h.CheckUpstream)
	}
	log.Info("mrtr proxy", "upstream", upstreamName, "upstream_timeout", c.upstreamTimeout, "max_held", c.maxHeld,
		"max_upstream_state", c.maxState, "forward_authorization", c.forwardAuth, "max_body", c.maxBodyBytes,
		"read_timeout", c.readTimeout, "max_conns", c.maxConns)
	return c.serveMCP(ctx, log, endpoint, true) // the proxy checks Host on loopback itself
}

// errNoSubject refuses a verified credential without a subject: treating
// it as anonymous would let every such caller share one binding.
var errNoSubject = errors.New("the verified credential names no subject")

// bearerPrincipal is the caller the --auth-* middleware verified (go-sdk's
// TokenInfo: iss and sub), or anonymous without auth flags.
func bearerPrincipal(r *http.Request) (reqstate.Principal, error) {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return reqstate.Principal{}, nil
	}
	if ti.UserID == "" {
		return reqstate.Principal{}, errNoSubject
	}
	iss, _ := ti.Extra["iss"].(string)
	return reqstate.Principal{Issuer: iss, Subject: ti.UserID}, nil
}
