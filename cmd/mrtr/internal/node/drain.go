package node

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/app/observe"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// DefaultDrainTimeout is --drain-timeout's default.
const DefaultDrainTimeout = 30 * time.Second

// drainLogEvery is how often a drain says how many calls it waits for.
const drainLogEvery = 5 * time.Second

// drainedShutdown bounds the shutdown after a drain: the streams clients
// listen on (GET, subscriptions/listen) are cut then.
const drainedShutdown = 5 * time.Second

// drainPoll is how often a drain looks at what is still held or in flight.
const drainPoll = 20 * time.Millisecond

// DrainConfig is --drain-timeout and what a drain waits for: the /mcp
// requests in flight (counted by wrap) and, in the proxy, the calls a
// bridge holds for a client's answers.
type DrainConfig struct {
	timeout time.Duration // --drain-timeout; zero: no drain, stop at once
	// Signal is closed by the first SIGTERM or SIGINT (App.Drain); nil:
	// never (ending the command's ctx stops it as before).
	Signal <-chan struct{}
	// Held counts the calls held for a client's answers; nil: none (mrtr
	// serve holds nothing: its state travels in the token).
	Held func() int
	// Flows names the flows held or in flight in the drain's records; nil:
	// none named (mrtr serve). The proxy sets it before NewGuard, whose
	// guard reports to it (observer).
	Flows *flowTracker
	// logEvery is how often a drain says what it waits for; zero:
	// drainLogEvery.
	logEvery time.Duration

	inFlight atomic.Int64
	draining atomic.Bool
	forced   atomic.Bool // the drain ended by a second signal or its timeout
}

// drainFlags registers --drain-timeout.
func drainFlags(f *base.Flags, c *DrainConfig) {
	const name = "drain-timeout"
	f.Fs.DurationVar(&c.timeout, name, DefaultDrainTimeout, "")
	f.Add(base.GroupListen, name, "duration", "duration", base.ShortDuration(DefaultDrainTimeout),
		"on SIGTERM or SIGINT, /readyz turns 503 and the server goes on serving until no call is in flight or held for a client's answers (a paused call of a 2025-11-25 upstream), for at most this long; 0: stop at once. A second signal stops at once")
	f.Check(name, func() error {
		if c.timeout < 0 {
			return base.FlagErr(name, "%q is negative (0 stops at once)", c.timeout.String())
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
func (c *DrainConfig) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if counted(r) {
			if c.Flows != nil { // named before it is counted
				defer c.Flows.request(r)()
			}
			c.inFlight.Add(1)
			defer c.inFlight.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
}

// check is the "drain" check of /readyz: "draining" from the first
// signal on, so that a load balancer sends this node nothing new.
func (c *DrainConfig) check(context.Context) error {
	if c.draining.Load() {
		return &observe.CheckError{Status: "draining", Err: errors.New("the server is draining: it stops once no call is held or in flight")}
	}
	return nil
}

// counts returns the calls held and the requests in flight.
func (c *DrainConfig) counts() (held, inFlight int) {
	if c.Held != nil {
		held = c.Held()
	}
	return held, int(c.inFlight.Load())
}

// drain turns /readyz 503 and waits until nothing is held or in flight,
// --drain-timeout passes or ctx ends (the second signal). It reports
// whether everything ended; if not, the caller stops at once and what is
// left is lost. New calls are served meanwhile: the load balancer sends
// fewer once /readyz fails, and a client in the middle of a flow must be
// able to finish it (its resume may come through another replica).
func (c *DrainConfig) drain(ctx context.Context, log *slog.Logger) bool {
	c.draining.Store(true)
	held, inFlight := c.counts()
	start := time.Now()
	log.Info("mrtr draining: /readyz answers 503; serving until no call is held or in flight (a second SIGTERM or SIGINT stops at once)",
		"held", held, "in_flight", inFlight, "drain_timeout", c.timeout, c.waitingFor(held, inFlight))
	every := cmp.Or(c.logEvery, drainLogEvery)
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
		if time.Since(lastLog) >= every {
			lastLog = time.Now()
			log.Info("mrtr draining", "held", held, "in_flight", inFlight,
				"waited", time.Since(start).Round(time.Second), "left", (c.timeout - time.Since(start)).Round(time.Second), c.waitingFor(held, inFlight))
		}
		select {
		case <-poll.C:
			continue
		case <-deadline.C:
			log.Warn("mrtr drain timed out (--drain-timeout): stopping; the calls left are lost (their clients must start over)",
				"held", held, "in_flight", inFlight, "drain_timeout", c.timeout, c.waitingFor(held, inFlight))
		case <-ctx.Done():
			log.Warn("mrtr stopping at once (second signal); the calls left are lost (their clients must start over)",
				"held", held, "in_flight", inFlight, "waited", time.Since(start).Round(time.Millisecond), c.waitingFor(held, inFlight))
		}
		c.forced.Store(true)
		return false
	}
}

// UpstreamStopContext bounds stopping the upstream's processes: up to
// grace for each to end on its own, none after a forced stop (a second
// signal, an expired drain), where they are killed at once.
func (c *DrainConfig) UpstreamStopContext(grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	if c.forced.Load() {
		cancel()
	}
	return ctx, cancel
}

// mountDrain counts the requests of /mcp for the drain and adds its check
// to /readyz.
func (c *CommonConfig) mountDrain(h http.Handler) http.Handler {
	c.Tel.Health.Checks = append(c.Tel.Health.Checks, observe.Check{Name: "drain", Fn: c.DrainConfig.check, Quiet: true})
	return c.DrainConfig.wrap(h)
}

// waitingFor is the "waiting_for" attribute of a drain's records: the
// flows it waits for, each with its flow id (when known), method, target
// and whether it is held or in flight; empty without a tracker or when
// nothing is left.
func (c *DrainConfig) waitingFor(held, inFlight int) slog.Attr {
	if c.Flows == nil {
		return slog.Attr{} // not written
	}
	var l flowList
	if held+inFlight > 0 {
		l = c.Flows.list(time.Now())
	}
	return slog.Any("waiting_for", l)
}

// observer is the guard's Observer: next, and the drain's tracker of the
// flows held or in flight when there is one.
func (c *DrainConfig) observer(next mrtr.Observer) mrtr.Observer {
	switch {
	case c.Flows == nil:
		return next
	case next == nil:
		return c.Flows
	}
	return observe.Observers{next, c.Flows}
}

// maxNamedFlows bounds the flows a drain's record names; the rest are
// counted (flowList's "more").
const maxNamedFlows = 20

// flowRef is one flow a drain waits for.
type flowRef struct {
	Flow   string `json:"flow,omitempty"` // "" for a first call in flight
	Method string `json:"method"`
	Target string `json:"target,omitempty"`
	State  string `json:"state"` // "held" (for a client's answers) or "in_flight"
	Round  int    `json:"round,omitempty"`

	since time.Time
	anon  bool // a held flow of an anonymous caller: its token's TTL is AnonymousTTL
}

// flowList is what a drain waits for, as its records show it: a JSON
// array of flowRef, or in the text format one line "FLOW METHOD TARGET
// (STATE); ...".
type flowList []flowRef

// MarshalJSON writes the list as an array of objects (a text marshaler
// alone would be written as a string).
func (l flowList) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]flowRef(l))
}

// MarshalText writes the list on one line, for the text log format.
func (l flowList) MarshalText() ([]byte, error) {
	var b strings.Builder
	for i, f := range l {
		if i > 0 {
			b.WriteString("; ")
		}
		if f.Flow != "" {
			b.WriteString("flow " + f.Flow + " ")
		}
		b.WriteString(f.Method)
		if f.Target != "" {
			b.WriteString(" " + f.Target)
		}
		b.WriteString(" (" + f.State + ")")
	}
	return []byte(b.String()), nil
}

// flowTracker follows the flows this process holds or serves, as the
// guard reports them: paused (and so held by the bridge, until its token
// expires), resumed (in flight until the call ends), and the requests in
// flight that carry no state yet (named by their Mcp-Method and Mcp-Name
// headers). A drain names them. Safe for concurrent use.
type flowTracker struct {
	ttl, anonymousTTL time.Duration // a held flow is forgotten after its token's; zero: never

	mu       sync.Mutex
	flows    map[string]flowRef // by flow id
	requests map[*http.Request]flowRef
	pruneAt  int // the size of flows at which Paused forgets the expired ones
}

// minPrune is the least size of flowTracker.flows that is pruned.
const minPrune = 1024

func NewFlowTracker() *flowTracker {
	return &flowTracker{flows: map[string]flowRef{}, requests: map[*http.Request]flowRef{}}
}

// SetTTL sets how long a held flow lives: its token's TTL and the leeway
// on each side (as the bridge's holds).
func (t *flowTracker) SetTTL(p mrtr.Options) {
	lee := max(p.Leeway, 0)
	t.mu.Lock()
	t.ttl, t.anonymousTTL = p.TTL+2*lee, p.AnonymousTTL+2*lee
	t.mu.Unlock()
}

// request records r in flight until the returned func runs.
func (t *flowTracker) request(r *http.Request) func() {
	ref := flowRef{Method: mcpwire.Shown(r.Header.Get("Mcp-Method")), Target: mcpwire.Shown(r.Header.Get("Mcp-Name")), State: "in_flight", since: time.Now()}
	if ref.Method == "" {
		ref.Method = r.Method // a DELETE, a request without the header
	}
	t.mu.Lock()
	t.requests[r] = ref
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.requests, r)
		t.mu.Unlock()
	}
}

// list returns what is held or in flight at now: the flows, then the
// requests in flight whose flow is not known, oldest first, at most
// maxNamedFlows of them.
func (t *flowTracker) list(now time.Time) flowList {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l flowList
	named := map[string]int{} // method and target of the flows in flight, as many as there are
	t.pruneLocked(now)
	for _, f := range t.flows {
		l = append(l, f)
		if f.State == "in_flight" {
			named[f.Method+" "+f.Target]++
		}
	}
	for _, r := range t.requests {
		if k := r.Method + " " + r.Target; named[k] > 0 {
			named[k]-- // this request is that resume
			continue
		}
		l = append(l, r)
	}
	slices.SortFunc(l, func(a, b flowRef) int { return a.since.Compare(b.since) })
	if len(l) > maxNamedFlows {
		l = l[:maxNamedFlows]
	}
	return l
}

// pruneLocked forgets the flows whose token expired at now: a held call
// lives no longer than its token, and a call in flight that long is taken
// as gone (its end not reported).
func (t *flowTracker) pruneLocked(now time.Time) {
	for id, f := range t.flows {
		if t.expired(f, now) {
			delete(t.flows, id)
		}
	}
	t.pruneAt = max(2*len(t.flows), minPrune)
}

// expired reports whether the flow f's token expired at now.
func (t *flowTracker) expired(f flowRef, now time.Time) bool {
	ttl := t.ttl
	if f.anon {
		ttl = t.anonymousTTL
	}
	return ttl > 0 && now.Sub(f.since) > ttl
}

// Paused records the flow as held for its client's answers.
func (t *flowTracker) Paused(_ context.Context, e mrtr.PauseEvent) {
	id := e.FlowID()
	if id == "" {
		return
	}
	t.mu.Lock()
	now := time.Now()
	t.flows[id] = flowRef{Flow: id, Method: mcpwire.Shown(e.Method), Target: mcpwire.Shown(e.Target), State: "held", Round: e.Round, since: now, anon: e.Principal.Anonymous()}
	if len(t.flows) >= max(t.pruneAt, minPrune) { // abandoned pauses must not pile up between drains
		t.pruneLocked(now)
	}
	t.mu.Unlock()
}

// Resumed records an accepted resume's flow as in flight.
func (t *flowTracker) Resumed(_ context.Context, e mrtr.ResumeEvent) {
	id := e.FlowID()
	if id == "" || e.Outcome != mrtr.OutcomeOK {
		return
	}
	t.mu.Lock()
	t.flows[id] = flowRef{Flow: id, Method: mcpwire.Shown(e.Method), Target: mcpwire.Shown(e.Target), State: "in_flight", Round: e.Round, since: time.Now(), anon: e.Principal.Anonymous()}
	t.mu.Unlock()
}

// Ended forgets a flow whose call answered without pausing again.
func (t *flowTracker) Ended(_ context.Context, e mrtr.EndEvent) {
	if id := e.FlowID(); id != "" && !e.Paused {
		t.mu.Lock()
		delete(t.flows, id)
		t.mu.Unlock()
	}
}

// StoreCalled does nothing.
func (*flowTracker) StoreCalled(context.Context, mrtr.StoreEvent) {}
