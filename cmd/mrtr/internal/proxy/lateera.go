package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	mrtrproxy "github.com/mrtr-go/mrtr/proxy"
)

// The bounds of lateEra: its probes back off from lateEraBackoff, doubling,
// to lateEraMaxBackoff; a call waits up to lateEraCallWait for the era;
// while the upstream does not answer, the log says so every
// lateEraLogEvery.
const (
	lateEraBackoff    = 100 * time.Millisecond
	lateEraMaxBackoff = 5 * time.Second
	lateEraCallWait   = 5 * time.Second
	lateEraLogEvery   = 30 * time.Second
)

// msgNotReachableYet is the error of a call that arrived before the
// upstream ever answered.
const msgNotReachableYet = "the upstream is not reachable yet: until it answers, the proxy cannot tell whether it speaks 2026-07-28 or 2025-11-25 (whose calls it bridges); try again"

// lateEra serves /mcp in front of an HTTP upstream that did not answer
// when the proxy started: it probes the upstream's era again, backing off,
// until it answers, then binds the path for that era (the proxy as is for
// a 2026-07-28 upstream, the bridge for a 2025-11-25 one) for good. A call
// that arrives before waits for that a little (lateEraCallWait), then is
// refused (503, -32603), never passed on as if the upstream were modern.
// Safe for concurrent use; run runs once.
type lateEra struct {
	log   *slog.Logger
	name  string
	probe func(context.Context) (string, error)
	// bind returns the handler for era; set by the proxy before run.
	bind func(era string) (http.Handler, error)
	wait time.Duration

	kick  chan struct{} // a call or a readiness check waits: probe now
	known chan struct{} // closed once h is set
	h     atomic.Pointer[http.Handler]
	done  chan struct{} // closed when run returns

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc          // ends run
	stop    func(context.Context) error // ends what bind started (the bridge's sessions)
}

func newLateEra(log *slog.Logger, name string, probe func(context.Context) (string, error)) *lateEra {
	return &lateEra{log: log, name: name, probe: probe, wait: lateEraCallWait,
		kick: make(chan struct{}, 1), known: make(chan struct{}), done: make(chan struct{})}
}

// start runs the probes until the upstream answers, close or ctx ends.
func (l *lateEra) start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.started = true
	go l.run(ctx)
}

// run probes until the upstream answers or ctx ends, then binds.
func (l *lateEra) run(ctx context.Context) {
	defer close(l.done)
	start, lastLog := time.Now(), time.Now()
	backoff := lateEraBackoff
	for {
		era, err := l.probe(ctx)
		if err == nil {
			h, err := l.bind(era)
			if err != nil {
				l.log.Error("mrtr proxy: cannot serve the upstream", "upstream", l.name, "era", era, "error", err)
				return
			}
			l.h.Store(&h)
			close(l.known)
			l.log.Info("mrtr proxy: the upstream answers: its era is known, calls go through", "upstream", l.name, "era", era,
				"waited", time.Since(start).Round(time.Millisecond))
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(lastLog) >= lateEraLogEvery {
			lastLog = time.Now()
			l.log.Info("mrtr proxy: still waiting for the upstream to answer", "upstream", l.name, "waited", time.Since(start).Round(time.Second), "error", err)
		}
		// At least lateEraBackoff between probes, kicked or not: calls
		// arriving in a stream do not make it spin.
		if !sleepCtx(ctx, lateEraBackoff) {
			return
		}
		t := time.NewTimer(backoff - lateEraBackoff)
		select {
		case <-t.C:
		case <-l.kick:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, lateEraMaxBackoff)
	}
}

// sleepCtx waits d or until ctx ends; it reports whether ctx lives on.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// poke asks run to probe now rather than at the end of its backoff.
func (l *lateEra) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *lateEra) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	// While calls wait, the upstream is probed at the shortest interval,
	// whatever the backoff reached.
	l.poke()
	t := time.NewTimer(l.wait)
	defer t.Stop()
	tick := time.NewTicker(lateEraBackoff)
	defer tick.Stop()
wait:
	for {
		select {
		case <-l.known:
			(*l.h.Load()).ServeHTTP(w, r)
			return
		case <-r.Context().Done():
			return
		case <-tick.C:
			l.poke()
		case <-t.C:
			break wait
		}
	}
	w.Header().Set("Retry-After", "1")
	if r.Method != http.MethodPost {
		http.Error(w, msgNotReachableYet, http.StatusServiceUnavailable)
		return
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m)
	if len(m.ID) == 0 {
		m.ID = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": mrtr.CodeInternalError, "message": msgNotReachableYet}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(body)
}

// ready is the era's part of the upstream's /readyz check: "era_unknown"
// until the upstream answered a probe (and a probe is asked for now),
// then the bound path's own readiness.
func (l *lateEra) ready(ctx context.Context, bound func(context.Context) error) error {
	if l.h.Load() == nil {
		l.poke()
		return &observe.CheckError{Status: "era_unknown", Err: errors.New("the upstream's era is not known yet")}
	}
	if bound != nil {
		return bound(ctx)
	}
	return nil
}

// setStop records what stops the bound path.
func (l *lateEra) setStop(stop func(context.Context) error) {
	l.mu.Lock()
	l.stop = stop
	l.mu.Unlock()
}

// halt stops the probes and waits for a bind in progress: nothing is
// bound (nor a replica advertised) after it returns.
func (l *lateEra) halt() {
	l.mu.Lock()
	started, cancel := l.started, l.cancel
	l.mu.Unlock()
	if started {
		cancel()
		<-l.done
	}
}

// close halts and ends the bound path (the bridge's sessions), if any.
func (l *lateEra) close(ctx context.Context) error {
	l.halt()
	l.mu.Lock()
	stop := l.stop
	l.mu.Unlock()
	if stop == nil {
		return nil
	}
	return stop(ctx)
}

// bindLate readies the proxy's late binding (c.late) to serve an HTTP
// upstream once it answers: modern as is (the proxy's own handler), a
// 2025-11-25 one through a bridge (the proxy's opts with the bridge as
// their Transport), its replicas then started. Until then /readyz reports
// the upstream unreachable, or its era unknown; the probes start with
// the listener.
func (c *Config) bindLate(ctx context.Context, log *slog.Logger, guard *mrtr.Guard, modern *mrtrproxy.Handler, opts mrtrproxy.Options, replicas *replicaSet) {
	l := c.UpstreamConfig.late
	var listened net.Addr // set before the probes start
	l.bind = func(era string) (http.Handler, error) {
		if era == eraModern {
			logModernHTTP(log, l.name)
			if c.Advertise != "" {
				log.Warn(advertiseIgnored)
			}
			return modern, nil
		}
		b := c.httpBridge(guard, log, upstreamHTTPTransport(c.dialTimeout), l.name)
		l.setStop(b.Close)
		var peersOpt *mrtrproxy.Peers
		if replicas != nil {
			if w := loopbackAdvertise(c.Addr, c.Advertise); w != "" {
				log.Warn(w, "addr", c.Addr)
			}
			if err := checkAdvertise(c.Addr, c.Advertise); err != nil {
				log.Error("mrtr proxy: replicas off: the other replicas cannot forward to this one the resumes of the calls it holds", "error", err)
			} else if err := replicas.start(ctx, log, advertiseURL(c.Addr, c.Advertise, listened), c.Codec, guard.Policy().ServerID); err != nil {
				log.Error("mrtr proxy: replicas off: the other replicas cannot forward to this one the resumes of the calls it holds", "error", err)
			} else {
				peersOpt = replicas.peersOf(c.Codec, guard, c.Tel.Observer)
			}
		}
		opts.Transport, opts.Peers = b, peersOpt
		h, err := mrtrproxy.New(opts)
		if err != nil || peersOpt == nil {
			return h, err
		}
		return replicas.tagForwarded(h), nil
	}
	c.Tel.AddUpstreamReadiness(func(ctx context.Context) error {
		if err := modern.CheckUpstream(ctx); err != nil {
			return err
		}
		var bound func(context.Context) error
		if r := c.UpstreamConfig.bound.ready.Load(); r != nil {
			bound = *r
		}
		return l.ready(ctx, bound)
	})
	c.OnListen = func(a net.Addr) error {
		listened = a
		l.start(ctx)
		return nil
	}
}
