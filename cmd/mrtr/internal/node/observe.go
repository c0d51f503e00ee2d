package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Telemetry is what --metrics-addr and the OTEL_* variables turn on, and
// the health probes: built by NewGuard, used by the command that serves.
type Telemetry struct {
	Registry *prometheus.Registry     // nil without --metrics-addr
	tracing  *sdktrace.TracerProvider // nil unless OTEL_EXPORTER_OTLP_*ENDPOINT is set
	Observer mrtr.Observer            // nil when neither is on
	// TaskObserver reports tasks (task.Options.Observer) to the same
	// metrics, spans and audit trail as the guard's events; nil when none
	// is on.
	TaskObserver task.Observer
	Health       *observe.Health
}

// env reads a variable through the command's getenv.
func (c *CommonConfig) env(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

// newTelemetry builds the metrics registry (with --metrics-addr) and the
// OTLP tracer provider (with the OTEL_* variables), and the observer that
// feeds both.
func (c *CommonConfig) newTelemetry(ctx context.Context, log *slog.Logger) (*Telemetry, error) {
	t := &Telemetry{Health: &observe.Health{Logger: log}}
	var obs observe.Observers
	if c.MetricsAddr != "" {
		t.Registry = prometheus.NewRegistry()
		t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m, err := observe.NewMetrics(t.Registry)
		if err != nil {
			return nil, err
		}
		obs = append(obs, m)
	}
	tp, err := observe.OTLPTracing(ctx, c.env, "mrtr", base.Version)
	if err != nil {
		return nil, err
	}
	if tp != nil {
		t.tracing = tp
		obs = append(obs, observe.NewTracer(tp))
		log.Info("mrtr tracing: exporting spans over OTLP/HTTP")
	}
	switch len(obs) {
	case 0:
	case 1:
		t.Observer = obs[0]
	default:
		t.Observer = obs
	}
	for _, o := range obs {
		t.addTaskObserver(o)
	}
	return t, nil
}

// addTaskObserver adds o to TaskObserver when it observes tasks (metrics,
// the tracer, the audit trail).
func (t *Telemetry) addTaskObserver(o any) {
	to, ok := o.(task.Observer)
	if !ok {
		return
	}
	switch cur := t.TaskObserver.(type) {
	case nil:
		t.TaskObserver = to
	case observe.TaskObservers:
		t.TaskObserver = append(cur, to)
	default:
		t.TaskObserver = observe.TaskObservers{cur, to}
	}
}

// addReadiness adds the checks of /readyz: the key ring in use (ring
// reads it: it may be reloaded) has a key whose window is open now, and
// a store that can be pinged (Redis) answers within --replay-timeout. The
// in-memory store is always ready.
func (t *Telemetry) addReadiness(ring func() *reqstate.KeyRing, store replay.Store, replayURL string, timeout time.Duration) {
	t.Health.Timeout = timeout
	t.Health.Checks = append(t.Health.Checks, observe.Check{Name: "keys", Fn: func(context.Context) error {
		r := ring()
		if r == nil || r.Primary() == "" {
			return errors.New("no key ring")
		}
		if _, ok := r.SealingKey(time.Now()); !ok {
			return errors.New("no key of the ring may seal now")
		}
		return nil
	}})
	if p, ok := store.(interface{ Ping(context.Context) error }); ok {
		t.Health.Checks = append(t.Health.Checks, observe.Check{Name: "store", Fn: storeCheck(replayURL, p.Ping)})
	}
}

// AddUpstreamReadiness adds the proxy's upstream to /readyz: "not_found"
// when it answers 404 (the wrong path), "failing" for a 5xx,
// "unreachable" or "timeout" when it does not answer.
func (t *Telemetry) AddUpstreamReadiness(check func(context.Context) error) {
	t.Health.Checks = append(t.Health.Checks, observe.Check{Name: "upstream", Fn: func(ctx context.Context) error {
		err := check(ctx)
		var se *proxy.UpstreamStatusError
		switch {
		case errors.As(err, &se) && se.Status == http.StatusNotFound:
			return &observe.CheckError{Status: "not_found", Err: err}
		case errors.As(err, &se):
			return &observe.CheckError{Status: "failing", Err: err}
		}
		return err
	}})
}

// close flushes the last spans.
func (t *Telemetry) close(log *slog.Logger) {
	if t == nil || t.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.tracing.Shutdown(ctx); err != nil {
		log.Warn("mrtr tracing: flushing the last spans", "error", err)
	}
}

// mountHealth serves /healthz and /readyz on mux, outside authentication
// (an orchestrator's probe carries no credential) but behind the same
// Host check as /mcp.
func (c *CommonConfig) mountHealth(mux *http.ServeMux, hosts []string) {
	h := c.Tel.Health
	mux.Handle("/healthz", localOnly(hosts, http.HandlerFunc(h.Healthz)))
	mux.Handle("/readyz", localOnly(hosts, http.HandlerFunc(h.Readyz)))
}

// StartMetrics serves /metrics on --metrics-addr, its own listener, until
// the returned stop is called. Without --metrics-addr it does nothing.
func (c *CommonConfig) StartMetrics(log *slog.Logger) (stop func(), err error) {
	if c.MetricsAddr == "" || c.Tel == nil || c.Tel.Registry == nil {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", c.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(c.Tel.Registry, promhttp.HandlerOpts{
		Registry: c.Tel.Registry, // counts its own scrape errors
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: defaultIdleTimeout}
	go srv.Serve(ln)
	log.Info("mrtr metrics serving", "url", listenURL(c.MetricsAddr, ln.Addr(), "/metrics"))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}, nil
}
