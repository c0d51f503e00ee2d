package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/internal/app/observe"
)

// redisRefusal says what is wrong when Redis answered err with a refusal
// that waiting will not cure: a wrong or missing password, a user without
// the rights, a database that does not exist. Connection errors, timeouts
// and passing states (LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN) are no
// refusal: those may end on their own.
func redisRefusal(err error) (cause string, ok bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return "", false
	}
	msg := re.Error() // Redis's own words, never the password
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"):
		return "Redis refused the user or password of --replay (" + msg + ")", true
	case strings.HasPrefix(msg, "NOAUTH"):
		return "Redis wants a password and --replay gives none: redis://:PASSWORD@host:port/db (" + msg + ")", true
	case strings.HasPrefix(msg, "NOPERM"):
		return "the Redis user of --replay lacks a permission the store needs (" + msg + ")", true
	case strings.HasPrefix(msg, "ERR DB index is out of range"), strings.HasPrefix(msg, "ERR invalid DB index"):
		return "Redis has no such database: the /db of --replay is beyond its databases setting (" + msg + ")", true
	case strings.HasPrefix(msg, "ERR AUTH"), strings.HasPrefix(msg, "ERR invalid password"), strings.HasPrefix(msg, "ERR Client sent AUTH"):
		return "Redis refused the password of --replay (" + msg + ")", true
	}
	return "", false
}

// storeCheck is the readiness check of a Redis store: ping answers, with
// what /readyz shows when it does not. "refused" is a Redis that answers
// with an error (a wrong password); "unreachable" is one that no address
// of rawURL accepts a connection on (stopped, killed); "timeout" is one
// that accepts connections but does not answer in time.
func storeCheck(rawURL string, ping func(context.Context) error) func(context.Context) error {
	network, addrs := redisAddrs(rawURL)
	return func(ctx context.Context) error {
		// go-redis retries a refused dial for longer than a check may
		// take, so a stopped Redis looks like a slow one: ask the
		// addresses at the same time.
		refused := make(chan bool, 1)
		go func() { refused <- allRefuse(ctx, network, addrs) }()
		err := ping(ctx)
		if err == nil {
			return nil
		}
		if _, ok := redisRefusal(err); ok {
			return &observe.CheckError{Status: "refused", Err: err}
		}
		var re redis.Error
		if errors.As(err, &re) {
			return &observe.CheckError{Status: "error", Err: err}
		}
		if <-refused {
			return &observe.CheckError{Status: "unreachable", Err: err}
		}
		return err
	}
}

// allRefuse reports whether every address refuses a connection outright
// (nothing listens), as opposed to accepting one or not answering.
func allRefuse(ctx context.Context, network string, addrs []string) bool {
	if len(addrs) == 0 {
		return false
	}
	var d net.Dialer
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, a)
		if err == nil {
			c.Close()
			return false
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return false
		}
	}
	return true
}

// redisAddrs are the addresses a --replay URL names: the server's, the
// sentinels' or the cluster's seeds (host and addr= parameters), or the
// socket's path.
func redisAddrs(rawURL string) (network string, addrs []string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "tcp", nil
	}
	if u.Scheme == "unix" {
		return "unix", []string{u.Path}
	}
	port := "6379"
	if u.Query().Has("master_name") {
		port = "26379"
	}
	withPort := func(h string) string {
		if _, _, err := net.SplitHostPort(h); err == nil {
			return h
		}
		return net.JoinHostPort(strings.Trim(h, "[]"), port)
	}
	if u.Host != "" {
		addrs = append(addrs, withPort(u.Host))
	}
	for _, a := range u.Query()["addr"] {
		addrs = append(addrs, withPort(a))
	}
	return "tcp", addrs
}

// storeRefused is the error that stops the server when Redis refuses it.
func storeRefused(name, cause string) error {
	return fmt.Errorf("--replay %s: %s; fix it and start again", name, cause)
}

// storeWatch tells the log when the Redis store stops accepting
// connections and when it accepts them again, once each, with the failed
// dials counted in between, per address (a Cluster's nodes, a Sentinel's
// primary): go-redis itself logs every failed dial, several times a
// second while /readyz is polled and resumes come in. It is a redis.Hook
// on the store's own client, safe for concurrent use.
type storeWatch struct {
	log *slog.Logger
	now func() time.Time // nil: time.Now

	mu    sync.Mutex
	down  map[string]*outage // by address
	quiet bool               // record outages without saying so (the startup check says it)
}

// The messages of storeWatch.
const (
	storeDownMsg = "redis single-use store: cannot connect; resumes fail closed until it is back (said once, and once when it is)"
	storeBackMsg = "redis single-use store: connected again"
)

// outage is one address's time down.
type outage struct {
	since  time.Time
	failed int // dials that failed since
}

func newStoreWatch(log *slog.Logger) *storeWatch {
	return &storeWatch{log: log, down: map[string]*outage{}}
}

// watch hooks w into client: into each node of a Cluster as it is made
// (a ClusterClient's own hooks see no dial), else into client itself.
func (w *storeWatch) watch(client redis.UniversalClient) {
	if cc, ok := client.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(w) })
		return
	}
	client.AddHook(w)
}

// setQuiet turns the message of an address going down off or on.
func (w *storeWatch) setQuiet(q bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.quiet = q
}

func (w *storeWatch) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// dialed records the outcome of one dial of addr.
func (w *storeWatch) dialed(addr string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.down[addr]
	switch {
	case err != nil && o == nil:
		w.down[addr] = &outage{since: w.clock(), failed: 1}
		if !w.quiet {
			w.log.Warn(storeDownMsg, "addr", addr, "error", err)
		}
	case err != nil:
		o.failed++
	case o != nil:
		delete(w.down, addr)
		w.log.Info(storeBackMsg, "addr", addr,
			"down_for", w.clock().Sub(o.since).Round(time.Millisecond), "failed_dials", o.failed)
	}
}

// DialHook watches every dial of the client's pool.
func (w *storeWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil && ctx.Err() != nil {
			return c, err // cut short by the caller: says nothing of the store
		}
		if addr == "FailoverClient" { // go-redis's name for a Sentinel's primary, resolved at each dial
			addr = "the primary the sentinels name"
		}
		w.dialed(addr, err)
		return c, err
	}
}

// ProcessHook passes commands on unwatched.
func (w *storeWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes pipelines on unwatched.
func (w *storeWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
