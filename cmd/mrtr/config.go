package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// serveConfig is everything `mrtr serve` can be told, by flag or by the
// MRTR_* variable of the same name (the flag wins).
type serveConfig struct {
	addr         string
	stdio        bool
	keysFile     string
	keysJSON     string // MRTR_KEYS only: the key ring itself
	ttl          time.Duration
	anonTTL      time.Duration
	maxRounds    int
	serverID     string
	replay       string
	replayTO     time.Duration // bound on each call to a Redis store
	authSecret   string
	authIssuer   string
	logFormat    string
	logLevel     string
	maxBodyBytes int64
	allowedHosts string

	parseLater func() error // validates the string-typed flags after parsing
}

const defaultMaxBodyBytes = 1 << 20

// envFlag describes one flag and its environment variable.
type envFlag struct {
	name, env string
}

func (a *app) serveFlags(c *serveConfig) (*flag.FlagSet, []envFlag) {
	fs := a.newFlagSet("serve", "mrtr serve [flags]")
	var vars []envFlag
	str := func(p *string, name, def, usage string) {
		env := "MRTR_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fs.StringVar(p, name, def, usage+" ($"+env+")")
		vars = append(vars, envFlag{name, env})
	}
	var ttl, anonTTL, maxRounds, maxBody, stdio, replayTO string
	str(&c.addr, "addr", "127.0.0.1:8080", "listen address of the Streamable HTTP endpoint /mcp")
	str(&stdio, "stdio", "false", "serve MCP on stdin/stdout instead of HTTP")
	str(&c.keysFile, "keys", "", "key ring file (JSON); $MRTR_KEYS may hold the JSON itself; none: an ephemeral ring")
	str(&ttl, "ttl", mrtr.DefaultTTL.String(), "lifetime of a requestState issued to an authenticated caller")
	str(&anonTTL, "anonymous-ttl", mrtr.DefaultAnonymousTTL.String(), "lifetime of a requestState issued to an anonymous caller")
	str(&maxRounds, "max-rounds", strconv.Itoa(mrtr.DefaultMaxRounds), "how many times one flow may pause")
	str(&c.serverID, "server-id", mrtr.DefaultServerID, "server id bound into every requestState (same on every node of a cluster)")
	str(&c.replay, "replay", "memory", "single-use store: memory, off, or redis://host:port/db (rediss:// for TLS)")
	str(&replayTO, "replay-timeout", redisstore.DefaultTimeout.String(), "with a redis:// store: how long one store call may take before the resume fails closed")
	str(&c.authSecret, "auth-hs256-secret", "", "require a bearer JWT signed with this HS256 secret (sub and exp checked)")
	str(&c.authIssuer, "auth-issuer", "", "with --auth-hs256-secret: require this iss claim")
	str(&c.logFormat, "log-format", "text", "log format: text or json")
	str(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	str(&maxBody, "max-body", strconv.Itoa(defaultMaxBodyBytes), "largest request body accepted, in bytes")
	str(&c.allowedHosts, "allowed-hosts", "", "extra Host header values accepted on a loopback bind, comma separated")
	c.parseLater = func() error {
		var err error
		if c.stdio, err = strconv.ParseBool(stdio); err != nil {
			return flagErr("stdio", "%q is not a boolean", stdio)
		}
		if c.ttl, err = positiveDuration("ttl", ttl); err != nil {
			return err
		}
		if c.anonTTL, err = positiveDuration("anonymous-ttl", anonTTL); err != nil {
			return err
		}
		if c.replayTO, err = positiveDuration("replay-timeout", replayTO); err != nil {
			return err
		}
		if c.maxRounds, err = strconv.Atoi(maxRounds); err != nil || c.maxRounds < 1 {
			return flagErr("max-rounds", "%q is not a positive integer", maxRounds)
		}
		if c.maxBodyBytes, err = strconv.ParseInt(maxBody, 10, 64); err != nil || c.maxBodyBytes < 1024 {
			return flagErr("max-body", "%q is not an integer of at least 1024", maxBody)
		}
		switch c.logFormat {
		case "text", "json":
		default:
			return flagErr("log-format", "%q is neither text nor json", c.logFormat)
		}
		if _, err := parseLevel(c.logLevel); err != nil {
			return err
		}
		switch {
		case c.replay == "memory", c.replay == "off":
		case strings.HasPrefix(c.replay, "redis://"), strings.HasPrefix(c.replay, "rediss://"):
		default:
			return flagErr("replay", "%q is not memory, off or a redis:// URL", c.replay)
		}
		return nil
	}
	return fs, vars
}

func positiveDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, flagErr(name, "%q is not a positive duration (like 90s or 5m)", v)
	}
	return d, nil
}

// flagError is a bad flag value; parseServe names the environment
// variable when the value came from there.
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
	fs, vars := a.serveFlags(c)
	// Environment first, so that flags given on the command line win.
	fromEnv := map[string]envFlag{}
	for _, v := range vars {
		if val := a.getenv(v.env); val != "" {
			if err := fs.Set(v.name, val); err != nil {
				return nil, fmt.Errorf("$%s: %v", v.env, err)
			}
			fromEnv[v.name] = v
		}
	}
	c.keysJSON = a.getenv("MRTR_KEYS")
	if c.keysJSON != "" && strings.HasPrefix(strings.TrimSpace(c.keysJSON), "{") {
		c.keysFile = "" // MRTR_KEYS holds the ring itself, not a path
	} else {
		c.keysJSON = ""
	}
	pos, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 0 {
		fs.Usage()
		return nil, errUsage
	}
	if fs.Lookup("keys").Value.String() != "" {
		c.keysJSON = "" // an explicit --keys wins over $MRTR_KEYS
	}
	if err := c.parseLater(); err != nil {
		var fe *flagError
		if errors.As(err, &fe) {
			if v, ok := fromEnv[fe.name]; ok && fs.Lookup(fe.name).Value.String() == a.getenv(v.env) {
				fe.env = v.env
			}
		}
		return nil, err
	}
	return c, nil
}

// loadKeys returns the configured key ring, or an ephemeral one and
// ephemeral=true.
func (c *serveConfig) loadKeys() (ring *reqstate.KeyRing, ephemeral bool, err error) {
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
func (c *serveConfig) logger(w io.Writer, floor slog.Level) *slog.Logger {
	level, _ := parseLevel(c.logLevel)
	opts := &slog.HandlerOptions{Level: max(level, floor)}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
