package adapt

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// ModernVersion is the first protocol version with Multi Round-Trip
// Requests; older clients go through their SDK's bridge.
const ModernVersion = "2026-07-28"

// Need is one input request as the gate sees it, under its key.
type Need struct {
	Key string
	mcpwire.Need
}

// Needs are the input requests of one pause or result as the gate sees
// them, sorted by key. A slice, not a map: built once per pause and read
// twice, it costs one allocation.
type Needs []Need

// NeedsOf maps an SDK's input requests to what the gate needs of each,
// with needOf reading one, sorted by key; nil for none.
func NeedsOf[R any](reqs map[string]R, needOf func(R) mcpwire.Need) Needs {
	if len(reqs) == 0 {
		return nil
	}
	needs := make(Needs, 0, len(reqs))
	for k, r := range reqs {
		needs = append(needs, Need{Key: k, Need: needOf(r)})
	}
	if len(needs) > 1 {
		slices.SortFunc(needs, func(a, b Need) int { return strings.Compare(a.Key, b.Key) })
	}
	return needs
}

// Keys returns the keys of needs, in their order; nil for none.
func (needs Needs) Keys() []string {
	if len(needs) == 0 {
		return nil
	}
	keys := make([]string, len(needs))
	for i, n := range needs {
		keys[i] = n.Key
	}
	return keys
}

// Inputs returns the keys and methods of needs, in their order, for
// mrtr.Flow.PauseInputs; nil for none.
func (needs Needs) Inputs() []mrtr.Input {
	if len(needs) == 0 {
		return nil
	}
	in := make([]mrtr.Input, len(needs))
	for i, n := range needs {
		in[i] = mrtr.Input{Key: n.Key, Method: n.Method}
	}
	return in
}

// Logger returns l, or a logger that discards when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Gate returns the -32021 error for the needs caps cannot answer, or nil.
// A client that can answer them all, the common case, costs no allocation.
func Gate(caps mcpwire.Caps, needs Needs) error {
	if !slices.ContainsFunc(needs, func(n Need) bool { return caps.Lacks(n.Need) != "" }) {
		return nil
	}
	lack := caps.LacksAny(func(yield func(mcpwire.Need) bool) {
		for _, n := range needs {
			if !yield(n.Need) {
				return
			}
		}
	})
	return MissingCapabilities(lack...)
}

// Record lists the states sealed during one call, so an adapter can tell
// a sealed requestState from one a handler wrote by hand.
type Record struct {
	mu     sync.Mutex
	sealed []string
}

// Add records a sealed state.
func (r *Record) Add(tok string) {
	r.mu.Lock()
	r.sealed = append(r.sealed, tok)
	r.mu.Unlock()
}

// Has reports whether tok was sealed during the call.
func (r *Record) Has(tok string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.sealed, tok)
}

// CheckState refuses (ErrHandlerState) a result's requestState that r did
// not see sealed; an empty state passes.
func (r *Record) CheckState(st string) error {
	if st != "" && !r.Has(st) {
		return mrtr.ErrHandlerState
	}
	return nil
}

// Call is one pausable request, read by an adapter from its SDK's request.
type Call struct {
	Method    string
	Target    string // tool or prompt name, resource URI
	Version   string // the protocol version in effect for the request
	Principal reqstate.Principal
	Arguments json.RawMessage // nil when absent (hashed as {})
	State     string
	// Responses are the inputResponses, values in the SDK's own type; nil
	// when absent. NullResponses marks inputResponses present but null or
	// {}, which is refused (ErrNullResponses).
	Responses     map[string]any
	NullResponses bool
	// BadState marks a requestState member that is neither a string nor
	// null (StripBadState), which the guard refuses as ReasonInvalid.
	BadState bool
	// Meta is the request's _meta, for the guard's Observer (trace
	// context); nil for none.
	Meta map[string]any
	// Caps reads what the client declared, for the capability gate; it is
	// called at most once, and only when the handler pauses or asks. An
	// interface, not a func: an adapter's own call type implements it,
	// where a closure would be one more allocation per call.
	Caps CapsReader

	capsOnce sync.Once
	caps     mcpwire.Caps
}

// CapsReader reads what the client of a call declared it can answer.
type CapsReader interface {
	ReadCaps() mcpwire.Caps
}

// Declared returns what the client declared, computed once.
func (c *Call) Declared() mcpwire.Caps {
	c.capsOnce.Do(func() {
		if c.Caps != nil {
			c.caps = c.Caps.ReadCaps()
		}
	})
	return c.caps
}

// Begin runs the guard's checks for c.
func Begin(ctx context.Context, g *mrtr.Guard, c *Call) (*mrtr.Flow, error) {
	r := &mrtr.Request{
		BadResponses:    c.NullResponses || (c.Responses != nil && len(c.Responses) == 0),
		Method:          c.Method,
		ProtocolVersion: c.Version,
		Target:          c.Target,
		Principal:       c.Principal,
		Arguments:       c.Arguments,
		RequestState:    c.State,
		BadState:        c.BadState,
		Meta:            c.Meta,
	}
	if len(c.Responses) > 0 {
		r.InputResponses = c.Responses
	}
	return g.Begin(ctx, r)
}

// Result is what an adapter reads from a handler's result for the checks
// after it: the requestState it carries and what its input requests need.
type Result struct {
	State string
	Needs Needs
	// ToolError marks a tools/call result with isError set.
	ToolError bool
}

// Run is the common path of every handler: the guard's checks, the typed
// flow, the handler, the checks of its result (a requestState the flow
// did not seal, input requests the client cannot answer), and settling
// the single-use reservation. Errors come back unmapped: the adapter maps
// them with Wire.
//
// Settling can fail (the store times out): Flow.End then logs the error
// and Run still answers with what the handler returned, its result or its
// error. That is safe because a reservation holds until the token expires
// unless it is released: a commit that failed after the handler succeeded
// leaves the token reserved, so it never runs again, and the client gets
// the result it is owed instead of an error that would invite a retry the
// guard must refuse. A release that failed after a handler error only
// costs the user the token (a retry is refused as replayed).
func Run[R, C any](ctx context.Context, g *mrtr.Guard, c *Call, rec *Record, logger *slog.Logger,
	h func(context.Context, *Flow[C]) (R, error), inspect func(R) Result) (R, error) {
	var zero R
	f, err := Begin(ctx, g, c)
	if err != nil {
		return zero, err
	}
	fl, err := NewFlow[C](ctx, f, c, rec, logger)
	if err != nil {
		_ = f.End(ctx, err) // logged by End; see above
		return zero, err
	}
	res, err := h(ctx, fl)
	var ri Result
	if err == nil {
		ri = inspect(res)
		err = checkResult(c, f, ri)
	}
	ferr := finish(ctx, f, err, ri.ToolError)
	// Settled by the handler's own outcome: a handler that ran and
	// answered spends its token even when the audit trail refuses the
	// answer, so its side effects do not run again on a retry.
	eerr := f.End(ctx, err) // any error but ErrAudit is logged by End; see above
	if err == nil {
		switch {
		case ferr != nil:
			err = ferr // the audit trail did not record the answer: refused
		case errors.Is(eerr, mrtr.ErrAudit):
			err = eerr
		}
	}
	if err != nil {
		return zero, err
	}
	return res, nil
}

// finish reports the outcome of a call that did not pause to the guard's
// Auditor and Observer (mrtr.Flow.Finish).
func finish(ctx context.Context, f *mrtr.Flow, err error, toolError bool) error {
	switch {
	case err != nil:
		return f.Finish(ctx, mrtr.OutcomeError, WireOrInternal(err).Code)
	case toolError:
		return f.Finish(ctx, mrtr.OutcomeToolError, 0)
	}
	return f.Finish(ctx, mrtr.OutcomeComplete, 0)
}

// checkResult refuses a result with a requestState the flow did not seal,
// or with input requests this client cannot answer.
func checkResult(c *Call, f *mrtr.Flow, r Result) error {
	if r.State != "" {
		if tok, ok := f.Paused(); !ok || tok != r.State {
			return mrtr.ErrHandlerState
		}
	}
	if len(r.Needs) == 0 {
		return nil
	}
	return Gate(c.Declared(), r.Needs)
}
