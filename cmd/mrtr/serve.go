package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/demo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// version is the server version reported to clients.
const version = "0.1.0"

func (a *app) serve(ctx context.Context, args []string) error {
	c, err := a.parseServe(args)
	if err != nil {
		return err
	}
	log := c.logger(a.stderr, slog.LevelDebug)
	ring, ephemeral, err := c.loadKeys()
	if err != nil {
		return err
	}
	if ephemeral {
		log.Warn("NO KEY RING GIVEN: sealing with an ephemeral key that dies with this process. " +
			"Paused flows will not survive a restart and other nodes cannot resume them. " +
			"Run `mrtr keygen --out keys.json` and pass --keys keys.json (or set MRTR_KEYS) in production.")
	}
	store, closeStore, err := c.openStore(ctx, log)
	if err != nil {
		return err
	}
	defer closeStore()
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{
		TTL: c.ttl, AnonymousTTL: c.anonTTL, MaxRounds: c.maxRounds, ServerID: c.serverID, Store: store, Logger: log,
		// The Redis store bounds each call by --replay-timeout itself; the
		// guard's own bound must not cut it shorter.
		StoreTimeout: max(mrtr.DefaultStoreTimeout, c.replayTO+time.Second),
	})
	// go-sdk logs every session at info level (one per request on the
	// stateless wire); keep its lines for --log-level debug.
	sdkLog := c.logger(a.stderr, slog.LevelWarn)
	if lvl, _ := parseLevel(c.logLevel); lvl <= slog.LevelDebug {
		sdkLog = log
	}
	server := demo.NewServer(guard, &demo.Options{Name: "mrtr", Version: version, Logger: sdkLog})
	log.Info("mrtr policy", "keys", ring.IDs(), "server_id", c.serverID, "ttl", c.ttl, "anonymous_ttl", c.anonTTL,
		"max_rounds", c.maxRounds, "replay", c.replayName(), "auth", c.authSecret != "")

	if c.stdio {
		log.Info("mrtr serving on stdio")
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return a.serveHTTP(ctx, c, server, log)
}

// replayName describes the single-use store without any password.
func (c *serveConfig) replayName() string {
	if u, err := url.Parse(c.replay); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return c.replay
}

func (c *serveConfig) openStore(ctx context.Context, log *slog.Logger) (replay.Store, func(), error) {
	switch c.replay {
	case "off":
		return nil, func() {}, nil
	case "memory":
		return replay.NewMemory(nil), func() {}, nil
	}
	s, err := redisstore.NewFromURL(c.replay, &redisstore.Options{Timeout: c.replayTO})
	if err != nil {
		return nil, nil, fmt.Errorf("--replay: %w", err)
	}
	// Not fatal: resumes fail closed until Redis answers, everything else works.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		log.Warn("redis single-use store not reachable yet; resumes fail closed until it is", "replay", c.replayName(), "error", err)
	}
	return s, func() { s.Close() }, nil
}

func (a *app) serveHTTP(ctx context.Context, c *serveConfig, server *mcp.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	var h http.Handler = gosdk.NewHTTPHandler(server, &gosdk.HTTPOptions{MaxRequestBodyBytes: c.maxBodyBytes, Logger: log})
	if c.authSecret != "" {
		h = requireJWT(c.authSecret, c.authIssuer, h)
	}
	if loopback(ln.Addr()) {
		h = localOnly(c.allowedHostList(), h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("mrtr serving", "url", "http://"+ln.Addr().String()+"/mcp")
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("mrtr shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func (c *serveConfig) allowedHostList() []string {
	var hosts []string
	for _, h := range strings.Split(c.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	return hosts
}

func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// localOnly protects a loopback server against DNS rebinding: the Host
// header must name a loopback host (or an allowed one), and a browser's
// Origin, when present, must too.
func localOnly(allowed []string, next http.Handler) http.Handler {
	ok := func(hostport string) bool {
		host := strings.ToLower(hostport)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return true
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return true
		}
		for _, a := range allowed {
			if a == host || a == strings.ToLower(hostport) {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r.Host) {
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !ok(u.Host) {
				http.Error(w, "Forbidden: invalid Origin header", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
