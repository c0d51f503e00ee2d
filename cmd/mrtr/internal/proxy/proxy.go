package proxy

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

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/node"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/supervise"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Config is CommonConfig plus the flags only `mrtr proxy` has.
type Config struct {
	node.CommonConfig
	Upstream        string
	upstreamTimeout time.Duration
	dialTimeout     time.Duration
	upTransport     string // --upstream-transport
	maxHeld         int64
	maxState        int64
	forwardAuth     bool
	Advertise       string // --advertise; empty: http://ADDR/mcp
	UpstreamConfig
}

// About is the paragraph of `mrtr proxy --help`.
const About = `Puts mrtr in front of an MCP server written in any language (the upstream, reached over Streamable HTTP at --upstream URL, or a command run after -- and spoken to over stdio): serves http://ADDR/mcp (--addr, default 127.0.0.1:8080) and behaves exactly like the upstream, except that every input_required result leaves with its requestState sealed by the --keys ring, and every retry is checked before it reaches the upstream. ` +
	`/healthz answers while the process serves, /readyz while the keys, the store and the upstream are usable. ` +
	`Every flag can also be given as the MRTR_* variable shown; a flag wins over its variable.`

// Examples end `mrtr proxy --help`.
const Examples = `  mrtr proxy --upstream http://127.0.0.1:3000/mcp --addr 127.0.0.1:8081
  mrtr proxy --addr 127.0.0.1:8082 -- npx -y @modelcontextprotocol/server-everything
  mrtr proxy --roots file:///srv/data -- npx -y @modelcontextprotocol/server-filesystem /srv/data
  mrtr proxy --keys keys.json --replay redis://10.0.0.9:6379/0 --addr 0.0.0.0:8080 \
      --advertise http://10.0.0.5:8080/mcp -- npx -y @modelcontextprotocol/server-everything
`

// Flags registers the flags of `mrtr proxy`.
func Flags(f *base.Flags, c *Config) {
	node.CommonFlags(f, &c.CommonConfig)
	f.String(base.GroupUpstream, &c.Upstream, "upstream", "", "`URL` of the upstream MCP server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3000/mcp (required unless a command follows --)")
	f.Check("upstream", func() error {
		u, err := url.Parse(c.Upstream)
		switch {
		case len(c.Command) > 0 && c.Upstream != "":
			return base.FlagErr("upstream", "and a command after -- both name an upstream: give one")
		case c.runner != "" && c.Upstream != "":
			return base.FlagErr("runner", "and --upstream both name an upstream: give one")
		case c.runner != "" && len(c.Command) > 0:
			return base.FlagErr("runner", "and a command after -- both name an upstream: the command is the runner's (mrtr runner ... -- COMMAND)")
		case len(c.Command) > 0 || c.runner != "":
			return nil
		case c.Upstream == "":
			return base.FlagErr("upstream", "is required (the URL of the MCP server to put mrtr in front of), or a command after --: mrtr proxy [flags] -- npx -y PACKAGE")
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return base.FlagErr("upstream", "%s is not an http:// or https:// URL", node.RedactURL(c.Upstream))
		}
		return nil
	})
	runnerFlag(f, &c.UpstreamConfig)
	f.Duration(base.GroupUpstream, &c.upstreamTimeout, "upstream-timeout", mrtrproxy.DefaultUpstreamTimeout,
		"longest wait for the upstream's answer to one request (GET streams and subscriptions/listen are not limited)")
	f.Duration(base.GroupUpstream, &c.dialTimeout, "upstream-dial-timeout", mrtrproxy.DefaultDialTimeout, "longest wait to connect to the upstream")
	f.Choice(base.GroupUpstream, &c.upTransport, "upstream-transport", defaultUpstreamTransport(), []string{string(mrtrproxy.TransportStd), string(mrtrproxy.TransportLean)},
		"transport to an HTTP upstream: lean (the proxy's own HTTP/1.1 transport for POSTs up to 256 KiB, less CPU; the default where the system can peek at a socket, as Linux, macOS and the BSDs can) or std (Go's net/http transport for every request; the default elsewhere)")
	f.Check("upstream-transport", func() error {
		if c.upTransport == string(mrtrproxy.TransportLean) && !mrtrproxy.LeanTransportSupported {
			return base.FlagErr("upstream-transport", "lean needs a non-blocking socket peek, which %s lacks: use std", runtime.GOOS)
		}
		return nil
	})
	f.Size(base.GroupLimits, &c.maxHeld, "max-held", mrtrproxy.DefaultMaxHeldBytes, 1024,
		"largest final message of a pausable call the proxy holds to seal it (notifications before it are streamed, never held); larger is a -32603 error")
	f.Size(base.GroupLimits, &c.maxState, "max-upstream-state", mrtrproxy.DefaultMaxUpstreamState, 16,
		"largest upstream requestState carried in a sealed token (its JSON string); larger is a -32603 error naming the limit, never truncated")
	f.Bool(base.GroupUpstream, &c.forwardAuth, "forward-authorization", false,
		"pass the client's Authorization header to the upstream (off: tokens issued to the proxy are not passed through)")
	upstreamFlags(f, &c.UpstreamConfig)
	replicaFlags(f, c)
}

// defaultUpstreamTransport is --upstream-transport's default: lean where
// it can run.
func defaultUpstreamTransport() string {
	if mrtrproxy.LeanTransportSupported {
		return string(mrtrproxy.TransportLean)
	}
	return string(mrtrproxy.TransportStd)
}

// Parse reads flags over environment variables over defaults.
func Parse(a *base.App, args []string) (*Config, error) {
	c := new(Config)
	f := a.NewFlags("proxy", "mrtr proxy --upstream URL [flags]\n       mrtr proxy [flags] -- COMMAND [ARG...]\n       mrtr proxy --runner SOCKET [flags]", About)
	f.Examples = Examples
	Flags(f, c)
	if i := slices.Index(args, "--"); i >= 0 { // the upstream command, run as is: never parsed as flags
		c.Command, args = args[i+1:], args[:i]
		if len(c.Command) == 0 {
			return nil, base.FlagErr("upstream", "-- must be followed by the command that runs the upstream")
		}
	}
	if err := f.Parse(a.Getenv, args); err != nil {
		return nil, err
	}
	c.CommonConfig.Settle()
	c.Getenv = a.Getenv
	c.DrainConfig.Signal = a.Drain
	return c, nil
}

// Cmd is mrtr proxy.
var Cmd = &base.Command{Name: "proxy", Run: proxy, Drains: true}

// proxy runs the sealing proxy in front of --upstream.
func proxy(ctx context.Context, a *base.App, args []string) error {
	c, err := Parse(a, args)
	if err != nil {
		return err
	}
	if err := base.CheckCommand(c.Command); err != nil { // before the key ring's warning and the policy
		return err
	}
	if err := supervise.Undumpable(); err != nil { // before any child: they must not read $MRTR_KEYS in /proc
		return err
	}
	log := c.Logger(a.Stderr, slog.LevelDebug)
	// A drain names the flows it waits for (node's drain.go).
	c.DrainConfig.Flows = node.NewFlowTracker()
	c.Audit.Upstream = auditUpstream(c) // audit lines name the upstream (audit.go)
	guard, closeGuard, err := c.NewGuard(ctx, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	c.DrainConfig.Flows.SetTTL(guard.Policy())
	stopMetrics, err := c.StartMetrics(log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	hosts := c.AllowedHostList()
	c.UpstreamConfig.url, c.UpstreamConfig.dialTimeout = c.Upstream, c.dialTimeout
	c.UpstreamConfig.obs = c.CommonConfig.Tel
	c.UpstreamConfig.probeTimeout = a.ProbeTimeout
	// Replicas share a Redis store; a bridge names this process (its
	// node) in every held call's state.
	replicas := newReplicaSet(c.RedisStore)
	if replicas != nil {
		c.UpstreamConfig.node = replicas.node
	}
	// The waits of the start (the era probe) end at the first signal.
	pctx, cancelStart := a.UntilDrain(ctx)
	defer cancelStart()
	tr, stopUpstream, err := c.upstreamTransport(pctx, log, guard)
	if err != nil {
		return err
	}
	if stopUpstream != nil {
		defer func() {
			sctx, cancel := c.DrainConfig.UpstreamStopContext(15 * time.Second)
			defer cancel()
			_ = stopUpstream(sctx)
		}()
	}
	c.DrainConfig.Held = c.UpstreamConfig.heldCalls
	late := c.UpstreamConfig.late // an HTTP upstream not up yet (lateera.go)
	upstream, upstreamName := c.Upstream, c.Upstream
	if len(c.Command) > 0 {
		upstream, upstreamName = stdioUpstreamURL, "command "+base.CommandName(c.Command)
	} else if c.runner != "" {
		upstream, upstreamName = stdioUpstreamURL, "runner "+c.runner
	} else {
		upstreamName = upstreamShown(c.Upstream) // audit.go: no userinfo, query or fragment
	}
	var peersOpt *mrtrproxy.Peers
	if _, bridged := tr.(*bridge.Bridge); bridged && replicas != nil {
		if err := checkAdvertise(c.Addr, c.Advertise); err != nil {
			return err
		}
		if w := loopbackAdvertise(c.Addr, c.Advertise); w != "" {
			log.Warn(w, "addr", c.Addr)
		}
		peersOpt = replicas.peersOf(c.Codec, guard, c.Tel.Observer)
		c.OnListen = func(a net.Addr) error {
			return replicas.start(ctx, log, advertiseURL(c.Addr, c.Advertise, a), c.Codec, guard.Policy().ServerID)
		}
		defer replicas.stop()
	} else if late != nil && replicas != nil {
		defer func() { // started if the upstream turns out 2025-11-25
			late.halt()
			replicas.stop()
		}()
	} else if c.Advertise != "" {
		log.Warn(advertiseIgnored)
	}
	opts := mrtrproxy.Options{
		Upstream:             upstream,
		Transport:            tr,
		Guard:                guard,
		DialTimeout:          c.dialTimeout,
		UpstreamTransport:    mrtrproxy.TransportKind(c.upTransport),
		UpstreamTimeout:      c.upstreamTimeout,
		MaxBodyBytes:         c.MaxBodyBytes,
		MaxHeldBytes:         c.maxHeld,
		MaxUpstreamState:     int(c.maxState),
		Principal:            bearerPrincipal,
		ForwardAuthorization: c.forwardAuth,
		AllowedHosts:         hosts,
		Logger:               log,
		Peers:                peersOpt,
		TaskObserver:         c.Tel.TaskObserver, // the task requests it refuses itself: metrics, spans, audit lines
	}
	h, err := mrtrproxy.New(opts)
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
	} else if len(c.Command) == 0 && c.runner == "" {
		// Not fatal: the upstream may start after the proxy. (A command
		// upstream has its own readiness check, added by UpstreamTransport.)
		cctx, cancel := context.WithTimeout(ctx, c.dialTimeout+2*time.Second)
		if err := h.CheckUpstream(cctx); err != nil {
			log.Warn("mrtr proxy: the upstream does not serve MCP yet; calls fail until it does", "upstream", upstreamShown(c.Upstream), "error", err)
		}
		cancel()
		c.Tel.AddUpstreamReadiness(h.CheckUpstream)
	}
	log.Info("mrtr proxy", "upstream", upstreamName, "upstream_timeout", c.upstreamTimeout, "max_held", c.maxHeld,
		"max_upstream_state", c.maxState, "forward_authorization", c.forwardAuth, "max_body", c.MaxBodyBytes,
		"read_timeout", c.ReadTimeout, "max_conns", c.MaxConns)
	return c.ServeMCP(ctx, log, endpoint, true) // the proxy checks Host on loopback itself
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
