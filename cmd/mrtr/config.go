package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

	getenv func(string) string // for the OTEL_* variables; nil: os.Getenv
	tel    *telemetry          // built by newGuard
}

// serveConfig is commonConfig plus the flags only `mrtr serve` has.
type serveConfig struct {
	commonConfig
	stdio          bool
	sessionTimeout time.Duration // idle 2025-11-25 sessions close after this
	maxSessions    int           // live 2025-11-25 sessions at once
}

// flags is a flag set whose flags also read an MRTR_* environment
// variable, with range checks that run once flags and environment are
// both applied. Errors name the flag, the bad value and, when the value
// came from the environment, the variable.
type flags struct {
	fs      *flag.FlagSet
	envs    []envFlag
	checks  []flagCheck
	fromEnv map[string]string // flag name -> variable it was set from
}

// envFlag ties a flag to its environment variable. apply, when set,
// takes the variable's value instead of FlagSet.Set (MRTR_KEYS holds a
// path or the ring itself).
type envFlag struct {
	name, env string
	apply     func(string)
}

type flagCheck struct {
	name string
	fn   func() error // returns a *flagError for name
}

func (a *app) newFlags(name, synopsis string) *flags {
	return &flags{fs: a.newFlagSet(name, synopsis), fromEnv: map[string]string{}}
}

// envName is the variable of a flag: --replay-timeout reads MRTR_REPLAY_TIMEOUT.
func envName(flagName string) string {
	return "MRTR_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flags) env(name string) string {
	e := envName(name)
	f.envs = append(f.envs, envFlag{name: name, env: e})
	return " ($" + e + ")"
}

func (f *flags) check(name string, fn func() error) {
	f.checks = append(f.checks, flagCheck{name, fn})
}

func (f *flags) String(p *string, name, def, usage string) {
	f.fs.StringVar(p, name, def, usage+f.env(name))
}

func (f *flags) Bool(p *bool, name string, def bool, usage string) {
	f.fs.BoolVar(p, name, def, usage+f.env(name))
}

// Duration registers a duration flag that must be positive.
func (f *flags) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	f.fs.DurationVar(p, name, def, usage+f.env(name))
	f.check(name, func() error {
		if *p <= 0 {
			return flagErr(name, "%q is not a positive duration (like 90s or 5m)", p.String())
		}
		return nil
	})
}

// Int registers an integer flag of at least min.
func (f *flags) Int(p *int, name string, def, min int, usage string) {
	f.fs.IntVar(p, name, def, usage+f.env(name))
	f.check(name, func() error {
		if *p < min {
			return flagErr(name, "%d is below the minimum of %d", *p, min)
		}
		return nil
	})
}

// Int64 registers an integer flag of at least min.
func (f *flags) Int64(p *int64, name string, def, min int64, usage string) {
	f.fs.Int64Var(p, name, def, usage+f.env(name))
	f.check(name, func() error {
		if *p < min {
			return flagErr(name, "%d is below the minimum of %d", *p, min)
		}
		return nil
	})
}

// List registers a repeatable string flag; its environment variable holds
// the values separated by sep.
func (f *flags) List(p *[]string, name, sep, usage string) {
	f.fs.Func(name, usage+f.env(name), func(v string) error {
		*p = append(*p, v)
		return nil
	})
	e := &f.envs[len(f.envs)-1]
	e.apply = func(v string) {
		for _, x := range strings.Split(v, sep) {
			if x = strings.TrimSpace(x); x != "" {
				*p = append(*p, x)
			}
		}
	}
}

// Choice registers a string flag limited to choices.
func (f *flags) Choice(p *string, name, def string, choices []string, usage string) {
	f.String(p, name, def, usage)
	f.check(name, func() error {
		for _, c := range choices {
			if *p == c {
				return nil
			}
		}
		return flagErr(name, "%q is not one of %s", *p, strings.Join(choices, ", "))
	})
}

// parse reads the command line, then the environment for every flag the
// command line left unset, then runs the checks. It allows no positional
// arguments.
func (f *flags) parse(getenv func(string) string, args []string) error {
	pos, err := parse(f.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fmt.Fprintf(f.fs.Output(), "unexpected argument %q\n", pos[0])
		f.fs.Usage()
		return errUsage
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, e := range f.envs {
		val := getenv(e.env)
		if set[e.name] || val == "" {
			continue
		}
		if e.apply != nil {
			e.apply(val)
		} else if err := f.fs.Set(e.name, val); err != nil {
			return &flagError{name: e.name, env: e.env, msg: fmt.Sprintf("%q is not a valid %s", val, flagType(f.fs.Lookup(e.name)))}
		}
		f.fromEnv[e.name] = e.env
	}
	for _, c := range f.checks {
		if err := c.fn(); err != nil {
			var fe *flagError
			if errors.As(err, &fe) {
				fe.env = f.fromEnv[fe.name]
			}
			return err
		}
	}
	return nil
}

// flagType is the kind of value a flag takes, as --help names it.
func flagType(fl *flag.Flag) string {
	name, _ := flag.UnquoteUsage(fl)
	if name == "" {
		return "boolean"
	}
	return name
}

// commonFlags registers the flags shared by every command that serves
// MCP over HTTP.
func commonFlags(f *flags, c *commonConfig) {
	f.String(&c.addr, "addr", "127.0.0.1:8080", "listen address of the Streamable HTTP endpoint /mcp")
	f.String(&c.keysFile, "keys", "", "key ring `FILE` (JSON; $MRTR_KEYS may hold a path or the JSON itself); none: an ephemeral ring")
	// MRTR_KEYS holds a path or, starting with "{", the ring itself.
	f.envs[len(f.envs)-1].apply = func(v string) {
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			c.keysJSON = v
		} else {
			c.keysFile = v
		}
	}
	f.Duration(&c.keysPoll, "keys-poll", defaultKeysPoll,
		"how often the --keys file is checked; a change (or SIGHUP) reloads the key ring without a restart")
	f.Int64(&c.keySealWarn, "key-seal-warn", reqstate.DefaultSealWarn, 1,
		"warn when one key has sealed this many tokens in this process; with N nodes sharing a key, about 2^30/N (the AES-GCM budget is 2^32 per key across all nodes)")
	f.Duration(&c.ttl, "ttl", mrtr.DefaultTTL, "lifetime of a requestState issued to an authenticated caller")
	f.Duration(&c.anonTTL, "anonymous-ttl", mrtr.DefaultAnonymousTTL,
		"lifetime of a requestState issued to an anonymous caller; never longer than --ttl (the smaller of the two applies)")
	f.Int(&c.maxRounds, "max-rounds", mrtr.DefaultMaxRounds, 1, "how many times one flow may pause")
	f.String(&c.serverID, "server-id", mrtr.DefaultServerID, "server id bound into every requestState (same on every node of a cluster)")
	f.String(&c.replay, "replay", "memory", "single-use store: memory, off, redis://host:port/db (one Redis), "+
		"redis://sentinel1:26379?master_name=NAME&addr=sentinel2:26379 (Sentinel), "+
		"redis-cluster://node1:7000?addr=node2:7001 (Cluster); rediss:// and rediss-cluster:// for TLS")
	f.check("replay", func() error {
		switch {
		case c.replay == "memory", c.replay == "off":
		case strings.HasPrefix(c.replay, "redis://"), strings.HasPrefix(c.replay, "rediss://"),
			strings.HasPrefix(c.replay, "redis-cluster://"), strings.HasPrefix(c.replay, "rediss-cluster://"):
		default:
			// Never the value: it may hold a password.
			return flagErr("replay", "not memory, off, or a redis://, rediss://, redis-cluster:// or rediss-cluster:// URL")
		}
		return nil
	})
	f.Duration(&c.replayTO, "replay-timeout", redisstore.DefaultTimeout, "with a Redis store: how long one store call may take before the resume fails closed")
	f.Int(&c.replicas, "replay-replicas", 0, 0,
		"with a Redis store: a claim counts only once this many replicas acknowledged it (WAIT, or WAITAOF with appendonly); "+
			"else the resume fails closed. 0 trusts the primary alone")
	f.check("replay-replicas", func() error {
		if c.replicas > 0 && (c.replay == "memory" || c.replay == "off") {
			return flagErr("replay-replicas", "%d needs a Redis store (--replay); --replay %s has no replicas", c.replicas, c.replay)
		}
		return nil
	})
	authFlags(f, &c.auth)
	f.Choice(&c.logFormat, "log-format", "text", []string{"text", "json"}, "log format: text or json")
	f.String(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.check("log-level", func() error { _, err := parseLevel(c.logLevel); return err })
	f.Int64(&c.maxBodyBytes, "max-body", defaultMaxBodyBytes, 1024, "largest request body accepted, in bytes")
	f.Duration(&c.readTimeout, "read-timeout", defaultReadTimeout,
		"longest time to read one request, headers and body (a slower client is disconnected); responses and event streams are not limited")
	f.Int(&c.maxConns, "max-conns", defaultMaxConns, 1, "most client connections open at once; more wait until one closes")
	f.String(&c.allowedHosts, "allowed-hosts", "", "extra Host header values (host or host:port, comma separated) accepted on a loopback connection, which otherwise must name a loopback host")
	f.String(&c.metricsAddr, "metrics-addr", "", "listen address of the Prometheus endpoint /metrics, on its own listener (like 127.0.0.1:9464); empty: no metrics. Traces: set OTEL_EXPORTER_OTLP_ENDPOINT")
}

// serveFlags registers the flags of `mrtr serve`.
func serveFlags(f *flags, c *serveConfig) {
	commonFlags(f, &c.commonConfig)
	f.Bool(&c.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	f.Duration(&c.sessionTimeout, "session-timeout", defaultSessionTimeout,
		"a 2025-11-25 session (Mcp-Session-Id) that sees no request for this long is closed")
	f.Int(&c.maxSessions, "max-sessions", defaultMaxSessions, 1,
		"most live 2025-11-25 sessions at once; a new one beyond it gets HTTP 503, existing ones keep working")
}

// flagError is a bad flag value; env names the environment variable when
// the value came from there.
type flagError struct {
	name, msg string
	env       string
}

func (e *flagError) Error() string {
	if e.env != "" {
		return "$" + e.env + " (--" + e.name + "): " + e.msg
	}
	return "--" + e.name + ": " + e.msg
}

func flagErr(name, format string, args ...any) error {
	return &flagError{name: name, msg: fmt.Sprintf(format, args...)}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, flagErr("log-level", "%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// parseServe reads flags over environment variables over defaults.
func (a *app) parseServe(args []string) (*serveConfig, error) {
	c := new(serveConfig)
	f := a.newFlags("serve", "mrtr serve [flags]")
	serveFlags(f, c)
	if err := f.parse(a.getenv, args); err != nil {
		return nil, err
	}
	c.commonConfig.settle()
	c.getenv = a.getenv
	return c, nil
}

// settle resolves what depends on several flags once they are parsed.
func (c *commonConfig) settle() {
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
