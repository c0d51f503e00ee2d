package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr/internal/app/observe"
)

// defaultDrainTimeout is --drain-timeout's default.
const defaultDrainTimeout = 30 * time.Second

// drainLogEvery is how often a drain says how many calls it waits for.
const drainLogEvery = 5 * time.Second

// drainedShutdown bounds the shutdown after a drain: the streams clients
// listen on (GET, subscriptions/listen) are cut then.
const drainedShutdown = 5 * time.Second

// drainPoll is how often a drain looks at what is still held or in flight.
const drainPoll = 20 * time.Millisecond

// drainConfig is --drain-timeout and what a drain waits for: the /mcp
// requests in flight (counted by wrap) and, in the proxy, the calls a
// bridge holds for a client's answers.
type drainConfig struct {
	timeout time.Duration // --drain-timeout; zero: no drain, stop at once
	// signal is closed by the first SIGTERM or SIGINT (app.drain); nil:
	// never (ending the command's ctx stops it as before).
	signal <-chan struct{}
	// held counts the calls held for a client's answers; nil: none (mrtr
	// serve holds nothing: its state travels in the token).
	held func() int

	inFlight atomic.Int64
	draining atomic.Bool
	forced   atomic.Bool // the drain ended by a second signal or its timeout
}

// drainFlags registers --drain-timeout.
func drainFlags(f *flags, c *drainConfig) {
	const name = "drain-timeout"
	f.fs.DurationVar(&c.timeout, name, defaultDrainTimeout, "")
	f.add(groupListen, name, "duration", "duration", shortDuration(defaultDrainTimeout),
		"on SIGTERM or SIGINT, /readyz turns 503 and the server goes on serving until no call is in flight or held for a client's answers (a paused call of a 2025-11-25 upstream), for at most this long; 0: stop at once. A second signal stops at once")
	f.check(name, func() error {
		if c.timeout < 0 {
			return flagErr(name, "%q is negative (0 stops at once)", c.timeout.String())
		}
		return nil
	})
}

// counted reports whether a drain waits for r: every POST (a call, a
// resume, one forwarded by another replica included) and DELETE, but
// not the streams a client keeps open to listen (a GET, a
// subscriptions/listen), which end only when the client goes.
func counted(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost:
		return r.Header.Get("Mcp-Method") != "subscriptions/listen"
	case http.MethodDelete:
		return true
	}
	return false
}

// wrap counts the requests of h in flight.
func (c *drainConfig) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if counted(r) {
			c.inFlight.Add(1)
			defer c.inFlight.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
}

// check is the "drain" check of /readyz: "draining" from the first
// signal on, so that a load balancer sends this node nothing new.
func (c *drainConfig) check(context.Context) error {
	if c.draining.Load() {
		return &observe.CheckError{Status: "draining", Err: errors.New("the server is draining: it stops once no call is held or in flight")}
	}
	return nil
}

// counts returns the calls held and the requests in flight.
func (c *drainConfig) counts() (held, inFlight int) {
	if c.held != nil {
		held = c.held()
	}
	return held, int(c.inFlight.Load())
}

// drain turns /readyz 503 and waits until nothing is held or in flight,
// --drain-timeout passes or ctx ends (the second signal). It reports
// whether everything ended; if not, the caller stops at once and what is
// left is lost. New calls are served meanwhile: the load balancer sends
// fewer once /readyz fails, and a client in the middle of a flow must be
// able to finish it (its resume may come through another replica).
func (c *drainConfig) drain(ctx context.Context, log *slog.Logger) bool {
	c.draining.Store(true)
	held, inFlight := c.counts()
	start := time.Now()
	log.Info("mrtr draining: /readyz answers 503; serving until no call is held or in flight (a second SIGTERM or SIGINT stops at once)",
		"held", held, "in_flight", inFlight, "drain_timeout", c.timeout)
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	poll := time.NewTicker(drainPoll)
	defer poll.Stop()
	lastLog := start
	for {
		held, inFlight = c.counts()
		if held == 0 && inFlight == 0 {
			log.Info("mrtr drained: no call held or in flight", "waited", time.Since(start).Round(time.Millisecond))
			return true
		}
		if time.Since(lastLog) >= drainLogEvery {
			lastLog = time.Now()
			log.Info("mrtr draining", "held", held, "in_flight", inFlight,
				"waited", time.Since(start).Round(time.Second), "left", (c.timeout - time.Since(start)).Round(time.Second))
		}
		select {
		case <-poll.C:
			continue
		case <-deadline.C:
			log.Warn("mrtr drain timed out (--drain-timeout): stopping; the calls left are lost (their clients must start over)",
				"held", held, "in_flight", inFlight, "drain_timeout", c.timeout)
		case <-ctx.Done():
			log.Warn("mrtr stopping at once (second signal); the calls left are lost (their clients must start over)",
				"held", held, "in_flight", inFlight, "waited", time.Since(start).Round(time.Millisecond))
		}
		c.forced.Store(true)
		return false
	}
}

// upstreamStopContext bounds stopping the upstream's processes: up to
// grace for each to end on its own, none after a forced stop (a second
// signal, an expired drain), where they are killed at once.
func (c *drainConfig) upstreamStopContext(grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	if c.forced.Load() {
		cancel()
	}
	return ctx, cancel
}

// mountDrain counts the requests of /mcp for the drain and adds its check
// to /readyz.
func (c *commonConfig) mountDrain(h http.Handler) http.Handler {
	c.tel.health.Checks = append(c.tel.health.Checks, observe.Check{Name: "drain", Fn: c.drainConfig.check, Quiet: true})
	return c.drainConfig.wrap(h)
}
