package main

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
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// telemetry is what --metrics-addr and the OTEL_* variables turn on, and
// the health probes: built by newGuard, used by the command that serves.
type telemetry struct {
	registry *prometheus.Registry     // nil without --metrics-addr
	tracing  *sdktrace.TracerProvider // nil unless OTEL_EXPORTER_OTLP_*ENDPOINT is set
	observer mrtr.Observer            // nil when neither is on
	health   *observe.Health
}

// env reads a variable through the command's getenv.
func (c *commonConfig) env(k string) string {
	if c.getenv != nil {
		return c.getenv(k)
	}
	return os.Getenv(k)
}

// newTelemetry builds the metrics registry (with --metrics-addr) and the
// OTLP tracer provider (with the OTEL_* variables), and the observer that
// feeds both.
func (c *commonConfig) newTelemetry(ctx context.Context, log *slog.Logger) (*telemetry, error) {
	t := &telemetry{health: &observe.Health{Logger: log}}
	var obs observe.Observers
	if c.metricsAddr != "" {
		t.registry = prometheus.NewRegistry()
		t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m, err := observe.NewMetrics(t.registry)
		if err != nil {
			return nil, err
		}
		obs = append(obs, m)
	}
	tp, err := observe.OTLPTracing(ctx, c.env, "mrtr", version)
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
		t.observer = obs[0]
	default:
		t.observer = obs
	}
	return t, nil
}

// addReadiness adds the checks of /readyz: the key ring in use (ring
// reads it: it may be reloaded) has a key whose window is open now, and
// a store that can be pinged (Redis) answers within --replay-timeout. The
// in-memory store is always ready.
func (t *telemetry) addReadiness(ring func() *reqstate.KeyRing, store replay.Store, replayURL string, timeout time.Duration) {
	t.health.Timeout = timeout
	t.health.Checks = append(t.health.Checks, observe.Check{Name: "keys", Fn: func(context.Context) error {
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
		t.health.Checks = append(t.health.Checks, observe.Check{Name: "store", Fn: storeCheck(replayURL, p.Ping)})
	}
}

// addUpstreamReadiness adds the proxy's upstream to /readyz: "not_found"
// when it answers 404 (the wrong path), "failing" for a 5xx,
// "unreachable" or "timeout" when it does not answer.
func (t *telemetry) addUpstreamReadiness(check func(context.Context) error) {
	t.health.Checks = append(t.health.Checks, observe.Check{Name: "upstream", Fn: func(ctx context.Context) error {
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
func (t *telemetry) close(log *slog.Logger) {
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
func (c *commonConfig) mountHealth(mux *http.ServeMux, hosts []string) {
	h := c.tel.health
	mux.Handle("/healthz", localOnly(hosts, http.HandlerFunc(h.Healthz)))
	mux.Handle("/readyz", localOnly(hosts, http.HandlerFunc(h.Readyz)))
}

// startMetrics serves /metrics on --metrics-addr, its own listener, until
// the returned stop is called. Without --metrics-addr it does nothing.
func (c *commonConfig) startMetrics(log *slog.Logger) (stop func(), err error) {
	if c.metricsAddr == "" || c.tel == nil || c.tel.registry == nil {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", c.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(c.tel.registry, promhttp.HandlerOpts{
		Registry: c.tel.registry, // counts its own scrape errors
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: defaultIdleTimeout}
	go srv.Serve(ln)
	log.Info("mrtr metrics serving", "url", listenURL(c.metricsAddr, ln.Addr(), "/metrics"))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}, nil
}
