package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults of the command's own limits (the guard's are in package mrtr).
const (
	defaultMaxBodyBytes   = 1 << 20
	defaultReadTimeout    = 30 * time.Second
	defaultIdleTimeout    = 2 * time.Minute
	defaultMaxConns       = 1024
	defaultSessionTimeout = 10 * time.Minute
	defaultMaxSessions    = 1000
)

// commonConfig is what every HTTP-serving command (serve, and proxy
// after it) can be told, by flag or by the MRTR_* variable of the same
// name (the flag wins). commonFlags registers it.
type commonConfig struct {
	addr         string
	keysFile     string
	keysJSON     string        // MRTR_KEYS only: the key ring itself
	keysPoll     time.Duration // how often the key file is checked for changes
	keySealWarn  int64         // seals by one key in this process before a warning
	ttl          time.Duration
	anonTTL      time.Duration
	maxRounds    int
	serverID     string
	replay       string
	replayTO     time.Duration // bound on each call to a Redis store
	replicas     int           // replicas that must acknowledge each claim
	auth         authConfig
	logFormat    string
	logLevel     string
	maxBodyBytes int64
	readTimeout  time.Duration // reading one request, headers and body
	maxConns     int           // open client connections at once
	metricsAddr  string        // Prometheus /metrics listener; empty: off
	allowedHosts string        // extra Host values on a loopback connection
	audit        auditConfig   // --audit, --audit-required (audit.go)

	getenv func(string) string // for the OTEL_* variables; nil: os.Getenv
	tel    *telemetry          // built by newGuard
	// Built by newGuard too: the codec, and the store when it is Redis
	// (the proxy's replicas find each other on it).
	codec      reqstate.Codec
	redisStore *redisstore.Store
	// onListen, when set, runs once the listener of --addr is open, with
	// its address (--addr HOST:0 gets a port only then).
	onListen func(net.Addr) error

	drainConfig // --drain-timeout and what a drain waits for (drain.go)
}

// commonFlags registers the flags shared by every command that serves
// MCP over HTTP.
func commonFlags(f *flags, c *commonConfig) {
	f.String(groupListen, &c.addr, "addr", "127.0.0.1:8080", "listen address (`HOST:PORT`) of the Streamable HTTP endpoint /mcp and of /healthz and /readyz")
	f.String(groupListen, &c.allowedHosts, "allowed-hosts", "", "extra Host header values (host or host:port, comma separated) accepted on a loopback connection, which otherwise must name a loopback host (DNS rebinding protection)")
	drainFlags(f, &c.drainConfig)
	f.String(groupKeys, &c.keysFile, "keys", "", "key ring `FILE` (JSON, from mrtr keygen --out FILE), reloaded without a restart when it changes or on SIGHUP; $MRTR_KEYS may hold a path or the JSON itself. "+
		"none, or no --keys: an ephemeral ring that dies with the process, with a warning")
	// MRTR_KEYS holds a path or, starting with "{", the ring itself.
	f.envs[len(f.envs)-1].apply = func(v string) {
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			c.keysJSON = v
		} else {
			c.keysFile = v
		}
	}
	f.Duration(groupKeys, &c.keysPoll, "keys-poll", defaultKeysPoll,
		"how often the --keys file is checked for a change")
	f.Int64(groupKeys, &c.keySealWarn, "key-seal-warn", reqstate.DefaultSealWarn, 1,
		"warn when one key has sealed this many tokens in this process; with N nodes sharing a key, about 2^30/N (the AES-GCM budget is 2^32 per key across all nodes)")
	f.Duration(groupPolicy, &c.ttl, "ttl", mrtr.DefaultTTL, "lifetime of a requestState issued to an authenticated caller")
	f.Duration(groupPolicy, &c.anonTTL, "anonymous-ttl", mrtr.DefaultAnonymousTTL,
		"lifetime of a requestState issued to an anonymous caller; never longer than --ttl (the smaller of the two applies)")
	f.Int(groupPolicy, &c.maxRounds, "max-rounds", mrtr.DefaultMaxRounds, 1, "how many times one flow may pause")
	f.String(groupPolicy, &c.serverID, "server-id", mrtr.DefaultServerID, "server id bound into every requestState (the same on every node of a cluster)")
	f.String(groupStore, &c.replay, "replay", "memory", "single-use store: memory, off, redis://[:PASSWORD@]HOST:PORT/DB (one Redis; rediss:// for TLS), "+
		"unix:///path/to/redis.sock?db=N, "+
		"redis://sentinel1:26379?master_name=NAME&addr=sentinel2:26379 (Sentinel; &password= for the primary), "+
		"redis-cluster://node1:7000?addr=node2:7001 (Cluster; rediss-cluster:// for TLS)")
	f.check("replay", func() error {
		switch {
		case c.replay == "memory", c.replay == "off":
		case strings.HasPrefix(c.replay, "redis://"), strings.HasPrefix(c.replay, "rediss://"), strings.HasPrefix(c.replay, "unix://"),
			strings.HasPrefix(c.replay, "redis-cluster://"), strings.HasPrefix(c.replay, "rediss-cluster://"):
		default:
			return flagErr("replay", "%s is not memory, off, or a redis://, rediss://, unix://, redis-cluster:// or rediss-cluster:// URL", redactURL(c.replay))
		}
		return nil
	})
	f.Duration(groupStore, &c.replayTO, "replay-timeout", redisstore.DefaultTimeout, "with a Redis store: how long one store call may take before the resume fails closed (-32603)")
	f.Int(groupStore, &c.replicas, "replay-replicas", 0, 0,
		"with a Redis store: a claim counts only once this many replicas acknowledged it (WAIT, or WAITAOF with appendonly yes); "+
			"else the resume fails closed. 0 trusts the primary alone (docs/OPERATIONS.md, Many nodes on Redis)")
	f.check("replay-replicas", func() error {
		if c.replicas > 0 && (c.replay == "memory" || c.replay == "off") {
			return flagErr("replay-replicas", "%d needs a Redis store (--replay); --replay %s has no replicas", c.replicas, c.replay)
		}
		return nil
	})
	authFlags(f, &c.auth)
	f.Size(groupLimits, &c.maxBodyBytes, "max-body", defaultMaxBodyBytes, 1024, "largest request body accepted (413 beyond)")
	f.Duration(groupLimits, &c.readTimeout, "read-timeout", defaultReadTimeout,
		"longest time to read one request, headers and body (a slower client is disconnected); responses and event streams are not limited")
	f.Int(groupLimits, &c.maxConns, "max-conns", defaultMaxConns, 1, "most client connections open at once; more wait until one closes. Idle keep-alive connections close after 2 minutes")
	f.Choice(groupTelemetry, &c.logFormat, "log-format", "text", []string{"text", "json"}, "log format (logs never contain a token)")
	f.String(groupTelemetry, &c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.check("log-level", func() error { _, err := parseLevel(c.logLevel); return err })
	auditFlags(f, &c.audit)
	f.String(groupTelemetry, &c.metricsAddr, "metrics-addr", "", "listen address (`HOST:PORT`) of the Prometheus endpoint /metrics, on its own listener (like 127.0.0.1:9464); empty: no metrics. Traces: set OTEL_EXPORTER_OTLP_ENDPOINT")
}

// settle resolves what depends on several flags once they are parsed.
func (c *commonConfig) settle() {
	if c.keysFile == "none" {
		c.keysFile = "" // the ephemeral ring, as --keys says
	}
	// An anonymous token never outlives an authenticated one.
	c.anonTTL = min(c.anonTTL, c.ttl)
}

// loadKeys returns the configured key ring, or an ephemeral one and
// ephemeral=true.
func (c *commonConfig) loadKeys() (ring *reqstate.KeyRing, ephemeral bool, err error) {
	switch {
	case c.keysJSON != "":
		ring, err = reqstate.ParseKeyRing([]byte(c.keysJSON))
		if err != nil {
			return nil, false, fmt.Errorf("$MRTR_KEYS: %w", err)
		}
		return ring, false, nil
	case c.keysFile != "":
		ring, err = reqstate.LoadKeyRing(c.keysFile)
		return ring, false, err
	}
	ring, err = reqstate.GenerateKeyRing("ephemeral", nil)
	return ring, true, err
}

// logger returns the server's logger, at the configured level but never
// below floor.
func (c *commonConfig) logger(w io.Writer, floor slog.Level) *slog.Logger {
	level, _ := parseLevel(c.logLevel)
	opts := &slog.HandlerOptions{Level: max(level, floor)}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
