package node

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults of the command's own limits (the guard's are in package mrtr).
const (
	defaultMaxBodyBytes   = 1 << 20
	defaultReadTimeout    = 30 * time.Second
	defaultIdleTimeout    = 2 * time.Minute
	defaultMaxConns       = 1024
	DefaultSessionTimeout = 10 * time.Minute
	DefaultMaxSessions    = 1000
)

// CommonConfig is what every HTTP-serving command (serve, and proxy
// after it) can be told, by flag or by the MRTR_* variable of the same
// name (the flag wins). CommonFlags registers it.
type CommonConfig struct {
	Addr         string
	KeysFile     string
	KeysJSON     string        // MRTR_KEYS only: the key ring itself
	keysPoll     time.Duration // how often the key file is checked for changes
	keySealWarn  int64         // seals by one key in this process before a warning
	Ttl          time.Duration
	AnonTTL      time.Duration
	MaxRounds    int
	ServerID     string
	Replay       string
	ReplayTO     time.Duration // bound on each call to a Redis store
	Replicas     int           // replicas that must acknowledge each claim
	Auth         AuthConfig
	LogFormat    string
	LogLevel     string
	MaxBodyBytes int64
	ReadTimeout  time.Duration // reading one request, headers and body
	MaxConns     int           // open client connections at once
	MetricsAddr  string        // Prometheus /metrics listener; empty: off
	allowedHosts string        // extra Host values on a loopback connection
	Audit        auditConfig   // --audit, --audit-required (audit.go)

	Getenv func(string) string // for the OTEL_* variables; nil: os.Getenv
	Tel    *Telemetry          // built by NewGuard
	// Built by NewGuard too: the codec, and the store when it is Redis
	// (the proxy's replicas find each other on it).
	Codec      reqstate.Codec
	RedisStore *redisstore.Store
	// OnListen, when set, runs once the listener of --addr is open, with
	// its address (--addr HOST:0 gets a port only then).
	OnListen func(net.Addr) error

	DrainConfig // --drain-timeout and what a drain waits for (drain.go)
}

// CommonFlags registers the flags shared by every command that serves
// MCP over HTTP.
func CommonFlags(f *base.Flags, c *CommonConfig) {
	f.String(base.GroupListen, &c.Addr, "addr", "127.0.0.1:8080", "listen address (`HOST:PORT`) of the Streamable HTTP endpoint /mcp and of /healthz and /readyz")
	f.String(base.GroupListen, &c.allowedHosts, "allowed-hosts", "", "extra Host header values (host or host:port, comma separated) accepted on a loopback connection, which otherwise must name a loopback host (DNS rebinding protection)")
	drainFlags(f, &c.DrainConfig)
	f.String(base.GroupKeys, &c.KeysFile, "keys", "", "key ring `FILE` (JSON, from mrtr keygen --out FILE), reloaded without a restart when it changes or on SIGHUP; $MRTR_KEYS may hold a path or the JSON itself. "+
		"none, or no --keys: an ephemeral ring that dies with the process, with a warning")
	// MRTR_KEYS holds a path or, starting with "{", the ring itself.
	f.Envs[len(f.Envs)-1].Apply = func(v string) {
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			c.KeysJSON = v
		} else {
			c.KeysFile = v
		}
	}
	f.Duration(base.GroupKeys, &c.keysPoll, "keys-poll", defaultKeysPoll,
		"how often the --keys file is checked for a change")
	f.Int64(base.GroupKeys, &c.keySealWarn, "key-seal-warn", reqstate.DefaultSealWarn, 1,
		"warn when one key has sealed this many tokens in this process; with N nodes sharing a key, about 2^30/N (the AES-GCM budget is 2^32 per key across all nodes)")
	f.Duration(base.GroupPolicy, &c.Ttl, "ttl", mrtr.DefaultTTL, "lifetime of a requestState issued to an authenticated caller")
	f.Duration(base.GroupPolicy, &c.AnonTTL, "anonymous-ttl", mrtr.DefaultAnonymousTTL,
		"lifetime of a requestState issued to an anonymous caller; never longer than --ttl (the smaller of the two applies)")
	f.Int(base.GroupPolicy, &c.MaxRounds, "max-rounds", mrtr.DefaultMaxRounds, 1, "how many times one flow may pause")
	f.String(base.GroupPolicy, &c.ServerID, "server-id", mrtr.DefaultServerID, "server id bound into every requestState (the same on every node of a cluster)")
	f.String(base.GroupStore, &c.Replay, "replay", "memory", "single-use store: memory, off, redis://[:PASSWORD@]HOST:PORT/DB (one Redis; rediss:// for TLS), "+
		"unix:///path/to/redis.sock?db=N, "+
		"redis://sentinel1:26379?master_name=NAME&addr=sentinel2:26379 (Sentinel; &password= for the primary), "+
		"redis-cluster://node1:7000?addr=node2:7001 (Cluster; rediss-cluster:// for TLS)")
	f.Check("replay", func() error {
		switch {
		case c.Replay == "memory", c.Replay == "off":
		case strings.HasPrefix(c.Replay, "redis://"), strings.HasPrefix(c.Replay, "rediss://"), strings.HasPrefix(c.Replay, "unix://"),
			strings.HasPrefix(c.Replay, "redis-cluster://"), strings.HasPrefix(c.Replay, "rediss-cluster://"):
		default:
			return base.FlagErr("replay", "%s is not memory, off, or a redis://, rediss://, unix://, redis-cluster:// or rediss-cluster:// URL", RedactURL(c.Replay))
		}
		return nil
	})
	f.Duration(base.GroupStore, &c.ReplayTO, "replay-timeout", redisstore.DefaultTimeout, "with a Redis store: how long one store call may take before the resume fails closed (-32603)")
	f.Int(base.GroupStore, &c.Replicas, "replay-replicas", 0, 0,
		"with a Redis store: a claim counts only once this many replicas acknowledged it (WAIT, or WAITAOF with appendonly yes); "+
			"else the resume fails closed. 0 trusts the primary alone (docs/OPERATIONS.md, Many nodes on Redis)")
	f.Check("replay-replicas", func() error {
		if c.Replicas > 0 && (c.Replay == "memory" || c.Replay == "off") {
			return base.FlagErr("replay-replicas", "%d needs a Redis store (--replay); --replay %s has no replicas", c.Replicas, c.Replay)
		}
		return nil
	})
	authFlags(f, &c.Auth)
	f.Size(base.GroupLimits, &c.MaxBodyBytes, "max-body", defaultMaxBodyBytes, 1024, "largest request body accepted (413 beyond)")
	f.Duration(base.GroupLimits, &c.ReadTimeout, "read-timeout", defaultReadTimeout,
		"longest time to read one request, headers and body (a slower client is disconnected); responses and event streams are not limited")
	f.Int(base.GroupLimits, &c.MaxConns, "max-conns", defaultMaxConns, 1, "most client connections open at once; more wait until one closes. Idle keep-alive connections close after 2 minutes")
	f.Choice(base.GroupTelemetry, &c.LogFormat, "log-format", "text", []string{"text", "json"}, "log format (logs never contain a token)")
	f.String(base.GroupTelemetry, &c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.Check("log-level", func() error { _, err := base.ParseLevel(c.LogLevel); return err })
	auditFlags(f, &c.Audit)
	f.String(base.GroupTelemetry, &c.MetricsAddr, "metrics-addr", "", "listen address (`HOST:PORT`) of the Prometheus endpoint /metrics, on its own listener (like 127.0.0.1:9464); empty: no metrics. Traces: set OTEL_EXPORTER_OTLP_ENDPOINT")
}

// Settle resolves what depends on several flags once they are parsed.
func (c *CommonConfig) Settle() {
	if c.KeysFile == "none" {
		c.KeysFile = "" // the ephemeral ring, as --keys says
	}
	// An anonymous token never outlives an authenticated one.
	c.AnonTTL = min(c.AnonTTL, c.Ttl)
}

// LoadKeys returns the configured key ring, or an ephemeral one and
// ephemeral=true.
func (c *CommonConfig) LoadKeys() (ring *reqstate.KeyRing, ephemeral bool, err error) {
	switch {
	case c.KeysJSON != "":
		ring, err = reqstate.ParseKeyRing([]byte(c.KeysJSON))
		if err != nil {
			return nil, false, fmt.Errorf("$MRTR_KEYS: %w", err)
		}
		return ring, false, nil
	case c.KeysFile != "":
		ring, err = reqstate.LoadKeyRing(c.KeysFile)
		return ring, false, err
	}
	ring, err = reqstate.GenerateKeyRing("ephemeral", nil)
	return ring, true, err
}

// Logger returns the server's logger, at the configured level but never
// below floor.
func (c *CommonConfig) Logger(w io.Writer, floor slog.Level) *slog.Logger {
	level, _ := base.ParseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: max(level, floor)}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
