package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
)

// ServeMCP serves h at /mcp behind the --auth-* verifier, beside the
// health endpoints and the protected-resource metadata, on --addr until
// ctx ends. hostChecked says that h checks the Host of loopback requests
// itself (the proxy does); otherwise ServeMCP checks it in front of h.
func (c *CommonConfig) ServeMCP(ctx context.Context, log *slog.Logger, h http.Handler, hostChecked bool) error {
	authn, err := c.Auth.Verifier(ctx, log)
	if err != nil {
		return err
	}
	if authn != nil {
		defer authn.Close()
	}
	ln, err := c.listen()
	if err != nil {
		return err
	}
	if c.OnListen != nil {
		if err := c.OnListen(ln.Addr()); err != nil {
			ln.Close()
			return err
		}
	}
	hosts := c.AllowedHostList()
	local := func(h http.Handler) http.Handler { return localOnly(hosts, h) }
	mux := http.NewServeMux()
	// The metadata endpoints that protect mounts get the Host check either way.
	endpoint := protect(authn, h, mux, local)
	if !hostChecked {
		endpoint = local(endpoint)
	}
	mux.Handle("/mcp", c.mountDrain(endpoint))
	c.mountHealth(mux, hosts)
	return runHTTP(ctx, c.newHTTPServer(mux, log), ln, c.Addr, log, &c.DrainConfig)
}

// NewGuard builds the key ring, the single-use store and the guard, and
// logs the policy. The returned func closes the store and stops reloading
// the key ring.
func (c *CommonConfig) NewGuard(ctx context.Context, log *slog.Logger) (*mrtr.Guard, func(), error) {
	tel, err := c.newTelemetry(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	codec, ephemeral, stopKeys, err := c.openKeys(ctx, log, tel.sealWarnings())
	if err != nil {
		tel.close(log)
		return nil, nil, err
	}
	if ephemeral {
		log.Warn("NO KEY RING GIVEN: sealing with an ephemeral key that dies with this process. " +
			"Paused flows will not survive a restart and other nodes cannot resume them. " +
			"Run `mrtr keygen --out keys.json` and pass --keys keys.json (or set MRTR_KEYS) in production.")
	}
	store, closeStore, err := c.openStore(ctx, log)
	if err != nil {
		stopKeys()
		tel.close(log)
		return nil, nil, err
	}
	aud, closeAudit, err := c.openAudit(log, codec, tel) // audit.go
	if err != nil {
		closeStore()
		stopKeys()
		tel.close(log)
		return nil, nil, err
	}
	tel.addTaskObserver(aud) // the trail's task lines (audit/tasks.go)
	tel.addReadiness(codec.KeyRing, store, c.Replay, c.ReplayTO)
	c.Tel = tel
	c.Codec = codec
	c.RedisStore, _ = store.(*redisstore.Store)
	ring := codec.KeyRing()
	guard := mrtr.New(codec, &mrtr.Options{
		TTL: c.Ttl, AnonymousTTL: min(c.AnonTTL, c.Ttl), MaxRounds: c.MaxRounds, ServerID: c.ServerID, Store: store, Logger: log,
		Observer: c.DrainConfig.observer(tel.Observer), // and the drain's tracker of flows (drain.go)
		Auditor:  aud,
		// The Redis store bounds each call by --replay-timeout itself; the
		// guard's own bound must not cut it shorter.
		StoreTimeout: max(mrtr.DefaultStoreTimeout, c.ReplayTO+time.Second),
	})
	p := guard.Policy()
	sealing, _ := ring.SealingKey(time.Now())
	log.Info("mrtr policy", "keys", ring.IDs(), "primary", sealing, "server_id", p.ServerID, "ttl", p.TTL, "anonymous_ttl", p.AnonymousTTL,
		"max_rounds", p.MaxRounds, "replay", c.replayName(), "replay_replicas", c.Replicas, "auth", c.Auth.Enabled(),
		"metrics", c.MetricsAddr != "", "tracing", tel.tracing != nil)
	return guard, func() { closeStore(); stopKeys(); closeAudit(); tel.close(log) }, nil
}

// listen opens the listener of --addr, holding at most --max-conns
// client connections at once.
func (c *CommonConfig) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr: %w", err)
	}
	return newLimitListener(ln, c.MaxConns), nil
}

// newHTTPServer is the hardened server every command serves MCP with:
// headers and body must arrive within --read-timeout (the deadline is
// lifted once the body is read, so long responses and event streams are
// not cut; there is deliberately no WriteTimeout), and idle keep-alive
// connections close after defaultIdleTimeout.
func (c *CommonConfig) newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, c.ReadTimeout),
		ReadTimeout:       c.ReadTimeout,
		IdleTimeout:       defaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// runHTTP serves srv on ln until ctx ends, then shuts down gracefully;
// or, from the drain signal on, until d drained (then the same), or at
// once when the drain is cut short.
func runHTTP(ctx context.Context, srv *http.Server, ln net.Listener, addr string, log *slog.Logger, d *DrainConfig) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("mrtr serving", "url", listenURL(addr, ln.Addr(), "/mcp"))
	drained := false
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-d.Signal:
		if !d.drain(ctx, log) {
			srv.Close()
			return nil
		}
		drained = true
	}
	log.Info("mrtr shutting down")
	bound := 10 * time.Second
	if drained {
		// What is left are streams a client listens on, which end only
		// when it goes, and calls that arrived just now: the streams are
		// cut after drainedShutdown (a second signal: at once).
		bound = drainedShutdown
	}
	sctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if drained {
		defer context.AfterFunc(ctx, cancel)()
	}
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		if drained {
			d.forced.Store(ctx.Err() != nil)
			log.Info("mrtr shutting down: the streams still open are cut")
			return nil
		}
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// replayName describes the single-use store without any password: neither
// the user information nor a password query parameter (the Sentinel form
// carries the primary's there).
func (c *CommonConfig) replayName() string {
	u, err := url.Parse(c.Replay)
	if err != nil || u.Scheme == "" {
		if strings.Contains(c.Replay, "@") || strings.Contains(strings.ToLower(c.Replay), "password") {
			return "(unparsable URL)"
		}
		return c.Replay
	}
	u.User = nil
	maskPasswordParams(u)
	return u.String()
}

// RedactURL quotes a URL given by the user for an error message, its
// password replaced by xxxxx (url.URL.Redacted, and the same for password
// query parameters); a value that does not parse is named only by its
// scheme, as it may hold a password anywhere.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme == "" && strings.ContainsAny(raw, "@:")) {
		scheme, _, ok := strings.Cut(raw, "://")
		if ok && validScheme(scheme) {
			return "a " + scheme + ":// URL that does not parse"
		}
		return "a value that does not parse as a URL"
	}
	maskPasswordParams(u)
	return strconv.Quote(u.Redacted())
}

// validScheme reports whether s is a URL scheme (RFC 3986).
func validScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

// maskPasswordParams replaces the value of every query parameter whose
// name says password.
func maskPasswordParams(u *url.URL) {
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
}

func (c *CommonConfig) openStore(ctx context.Context, log *slog.Logger) (replay.Store, func(), error) {
	switch c.Replay {
	case "off":
		return nil, func() {}, nil
	case "memory":
		return replay.NewMemory(nil), func() {}, nil
	}
	// go-redis reports failovers and redials through its own logger, to
	// stderr in another format: route it into ours.
	redis.SetLogger(redisLog{log})
	s, err := redisstore.NewFromURL(c.Replay, &redisstore.Options{Timeout: c.ReplayTO, Replicas: c.Replicas})
	if err != nil {
		return nil, nil, fmt.Errorf("--replay: %w", err)
	}
	watch := newStoreWatch(log)
	watch.watch(s.Client())
	watch.setQuiet(true) // the check below says it at startup
	defer watch.setQuiet(false)
	// Not fatal: resumes fail closed until Redis answers, everything else works.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		if cause, ok := redisRefusal(err); ok {
			s.Close()
			return nil, nil, storeRefused(c.replayName(), cause)
		}
		log.Warn("redis single-use store not reachable yet; resumes fail closed until it is", "replay", c.replayName(), "error", err)
		return s, func() { s.Close() }, nil
	}
	c.checkDurability(pctx, s, log)
	return s, func() { s.Close() }, nil
}

// redisLog is go-redis's logger writing to the server's: its lines (a new
// primary found by Sentinel) at info level, but its failed dials at
// debug: the store's watch (storeWatch) says once when dials start
// failing and once when they succeed again.
//
// It is go-redis's one global logger (redis.SetLogger): v9 has no
// per-client one. The process has one store, and each command that
// opens it routes the lines into its own log; the dials it demotes are
// watched per client, by a hook.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	level := slog.LevelInfo
	if strings.Contains(format, "failed to dial") {
		level = slog.LevelDebug
	}
	l.log.Log(ctx, level, "redis client: "+fmt.Sprintf(format, v...))
}

// checkDurability asks the store's primaries, once at startup, whether a
// restart or failover would keep the claims, and warns once if not.
func (c *CommonConfig) checkDurability(ctx context.Context, s *redisstore.Store, log *slog.Logger) {
	d, err := s.Durability(ctx)
	if err != nil {
		// INFO may be renamed or forbidden by ACLs: say so once, quietly.
		log.Info("redis single-use store: could not check persistence and replicas", "error", err)
		return
	}
	switch {
	case !d.AOF && d.Replicas == 0:
		log.Warn("redis single-use store has neither AOF persistence (appendonly no) nor replicas: "+
			"if it restarts, every token used so far can be used once more until it expires. "+
			"Set appendonly yes (see docs/OPERATIONS.md, \"Many nodes on Redis\")",
			"replay", c.replayName(), "primaries", d.Primaries)
	case d.Replicas < c.Replicas:
		log.Warn("redis single-use store has fewer replicas than --replay-replicas: resumes fail closed until enough replicas connect",
			"replay", c.replayName(), "replicas", d.Replicas, "replay_replicas", c.Replicas)
	default:
		log.Info("redis single-use store durability", "aof", d.AOF, "replicas", d.Replicas, "replay_replicas", c.Replicas, "primaries", d.Primaries)
	}
}

// AllowedHostList is --allowed-hosts as a list of lower-case names.
func (c *CommonConfig) AllowedHostList() []string {
	var hosts []string
	for _, h := range strings.Split(c.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	return hosts
}

// localOnly protects against DNS rebinding on loopback connections: a
// request that arrived on a loopback address must name a loopback host
// (or an allowed one) in its Host header, and a browser's Origin, when
// present, must too. Requests on other addresses pass.
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
		if la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr); la != nil && !loopback(la) {
			next.ServeHTTP(w, r)
			return
		}
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

func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// limitListener holds at most n accepted connections open at once:
// Accept waits while n are open (the kernel queues the rest), and
// closing a connection frees its slot.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open is the number of connections holding a slot.
func (l *limitListener) open() int { return len(l.slots) }

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
