package mrtr

import (
	"context"
	"errors"
	"time"

	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Observer receives what a Guard does, for metrics and traces: every
// resume it decided, every pause it sealed, every call to its single-use
// store, and every call it let through, when that call ends. The guard
// calls it synchronously, on the request's goroutine, so an Observer must
// be safe for concurrent use and quick (count, record, never block on
// I/O).
//
// Events carry no token, no continuation, no argument and no principal.
// Method and Target come from the request: an Observer that turns Target
// into a metric label must bound its values itself.
//
// Embed NopObserver in an implementation so that it keeps compiling when
// this interface gains a method.
type Observer interface {
	// Resumed reports the decision of Begin on a call that carried a
	// requestState: accepted, refused with a reason, or the store could
	// not decide.
	Resumed(ctx context.Context, e ResumeEvent)
	// Paused reports a pause that Flow.Pause sealed. Its ctx is the one
	// Begin was called with.
	Paused(ctx context.Context, e PauseEvent)
	// StoreCalled reports one call to Options.Store: a reserve, or a
	// commit or release of a reservation.
	StoreCalled(ctx context.Context, e StoreEvent)
	// Ended reports a call that Begin let through, once, when Flow.End
	// first runs.
	Ended(ctx context.Context, e EndEvent)
}

// NopObserver does nothing. Embed it in an Observer to implement only
// some methods.
type NopObserver struct{}

// Resumed does nothing.
func (NopObserver) Resumed(context.Context, ResumeEvent) {}

// Paused does nothing.
func (NopObserver) Paused(context.Context, PauseEvent) {}

// StoreCalled does nothing.
func (NopObserver) StoreCalled(context.Context, StoreEvent) {}

// Ended does nothing.
func (NopObserver) Ended(context.Context, EndEvent) {}

// Call identifies the call an event belongs to. Every field but Start
// comes from the untrusted request.
type Call struct {
	// Method is tools/call, prompts/get or resources/read.
	Method string
	// ProtocolVersion is the MCP protocol version of the request.
	ProtocolVersion string
	// Target is the tool name, prompt name or resource URI.
	Target string
	// Meta is the request's _meta (Request.Meta): where a W3C trace
	// context travels (traceparent, tracestate). Read it, never change it.
	Meta map[string]any
	// Start is when Begin was called.
	Start time.Time
}

// Outcome is how Begin decided a resume: OutcomeOK, a rejection Reason,
// or OutcomeStoreUnavailable.
type Outcome string

// Outcomes that are not a Reason.
const (
	OutcomeOK               Outcome = "ok"                // the requestState was accepted
	OutcomeStoreUnavailable Outcome = "store_unavailable" // the single-use store could not decide (ErrStoreUnavailable)
	OutcomeInvalidArguments Outcome = "invalid_arguments" // the arguments cannot be hashed (ErrInvalidArguments)
)

// ResumeEvent is Begin's decision on a call that carried a requestState.
type ResumeEvent struct {
	Call
	// Outcome is OutcomeOK, Outcome(reason) for a rejection (invalid,
	// expired, replayed, rounds_exceeded, arguments_changed),
	// OutcomeInvalidArguments or OutcomeStoreUnavailable.
	Outcome Outcome
	// Round is the round the accepted state was sealed for (0 when
	// refused: nothing about a refused token is trusted).
	Round int
	// KeyID is the id of the key that opened an accepted state ("" when
	// refused, or with a codec whose tokens do not name their key the way
	// reqstate's do).
	KeyID string
	// Duration is how long Begin took, the store's reserve included.
	Duration time.Duration
}

// PauseEvent is a pause that Flow.Pause sealed.
type PauseEvent struct {
	Call
	// Round is the round sealed: 1 for a flow's first pause.
	Round int
	// KeyID is the id of the key that sealed the token (see
	// reqstate.TokenKeyID; "" with a codec whose tokens do not name it).
	KeyID string
	// TokenBytes is the length of the requestState sent to the client.
	TokenBytes int
}

// StoreOp is a call to the single-use store.
type StoreOp string

// The calls to the single-use store.
const (
	StoreReserve StoreOp = "reserve"
	StoreCommit  StoreOp = "commit"
	StoreRelease StoreOp = "release"
)

// StoreOutcome is how a call to the store ended.
type StoreOutcome string

// The outcomes of a store call.
const (
	StoreOK       StoreOutcome = "ok"       // done
	StoreReplayed StoreOutcome = "replayed" // replay.ErrReplayed: the id was taken
	StoreTimeout  StoreOutcome = "timeout"  // the context's deadline passed
	StoreError    StoreOutcome = "error"    // any other error: the store could not decide
)

// StoreEvent is one call to the single-use store.
type StoreEvent struct {
	Op       StoreOp
	Outcome  StoreOutcome
	Duration time.Duration
}

// EndEvent is a call that Begin let through, when Flow.End first runs.
type EndEvent struct {
	Call
	// Resumed reports that the call carried an accepted requestState.
	Resumed bool
	// Round is the flow's round when the call came in (Flow.Round).
	Round int
	// Paused reports that the call sealed a pause; KeyID and TokenBytes
	// describe it, as in PauseEvent.
	Paused     bool
	KeyID      string
	TokenBytes int
	// Failed reports that the handler returned an error (the handlerErr
	// of Flow.End).
	Failed bool
	// Duration is the time from Begin to End.
	Duration time.Duration
}

func (r *Request) call(start time.Time) Call {
	return Call{Method: r.Method, ProtocolVersion: r.ProtocolVersion, Target: r.Target, Meta: r.Meta, Start: start}
}

// observeBegin runs Begin and reports its decision on a resume. It is only
// called with an Observer set.
func (g *Guard) observeBegin(ctx context.Context, r *Request) (*Flow, error) {
	start := time.Now()
	// One allocation, as without an Observer: the Flow and what the
	// events need of it.
	fo := &struct {
		f Flow
		o flowObs
	}{o: flowObs{ctx: ctx, start: start, meta: r.Meta}}
	f, err := g.begin(ctx, r, &fo.f)
	if f != nil {
		f.obs = &fo.o
	}
	if (r.RequestState == "" && !r.BadState) || errors.Is(err, ErrInvalidResponses) {
		return f, err // a first call, or malformed params: no token was judged
	}
	e := ResumeEvent{Call: r.call(start), Outcome: OutcomeOK}
	switch re := err.(type) { // begin returns a *RejectError unwrapped
	case nil:
		e.Round = f.round
		e.KeyID = reqstate.TokenKeyID(r.RequestState)
	case *RejectError:
		e.Outcome = Outcome(re.Reason)
	default:
		e.Outcome = OutcomeStoreUnavailable
		if errors.Is(err, ErrInvalidArguments) {
			e.Outcome = OutcomeInvalidArguments
		}
	}
	e.Duration = time.Since(start)
	g.opts.Observer.Resumed(ctx, e)
	return f, err
}

// observePause reports a sealed pause, with Begin's context (Pause has
// none of its own). Called with f.mu held.
func (f *Flow) observePause(tok string) {
	ctx := context.Background()
	if f.obs != nil {
		ctx = f.obs.ctx
	}
	f.g.opts.Observer.Paused(ctx, PauseEvent{
		Call:       f.call(),
		Round:      f.round + 1,
		KeyID:      reqstate.TokenKeyID(tok),
		TokenBytes: len(tok),
	})
}

func (f *Flow) call() Call {
	c := Call{Method: f.binding.Method, ProtocolVersion: f.binding.ProtocolVersion, Target: f.binding.Target}
	if f.obs != nil {
		c.Meta, c.Start = f.obs.meta, f.obs.start
	}
	return c
}

// observeEnd runs End and reports the call's end, once.
func (f *Flow) observeEnd(ctx context.Context, handlerErr error) error {
	f.mu.Lock()
	first := !f.observed
	f.observed = true
	f.mu.Unlock()
	err := f.end(ctx, handlerErr)
	if !first {
		return err
	}
	f.mu.Lock()
	tok, paused := f.token, f.paused
	f.mu.Unlock()
	e := EndEvent{Call: f.call(), Resumed: f.resumed, Round: f.round, Paused: paused, Failed: handlerErr != nil}
	if paused {
		e.KeyID, e.TokenBytes = reqstate.TokenKeyID(tok), len(tok)
	}
	if f.obs != nil && !f.obs.start.IsZero() {
		e.Duration = time.Since(f.obs.start)
	}
	f.g.opts.Observer.Ended(ctx, e)
	return err
}

// observedStore reports every call to a store to an Observer.
type observedStore struct {
	s   replay.Store
	obs Observer
}

// observedNonBlocking keeps a store's replay.NonBlocking mark.
type observedNonBlocking struct{ observedStore }

func (observedNonBlocking) NonBlocking() {}

func observeStore(s replay.Store, obs Observer) replay.Store {
	o := observedStore{s: s, obs: obs}
	if _, ok := s.(replay.NonBlocking); ok {
		return observedNonBlocking{o}
	}
	return o
}

func (o observedStore) Reserve(ctx context.Context, id string, expires time.Time) (replay.Reservation, error) {
	start := time.Now()
	res, err := o.s.Reserve(ctx, id, expires)
	o.obs.StoreCalled(ctx, StoreEvent{Op: StoreReserve, Outcome: storeOutcome(err), Duration: time.Since(start)})
	if err != nil {
		return res, err
	}
	return &observedReservation{r: res, obs: o.obs}, nil
}

type observedReservation struct {
	r   replay.Reservation
	obs Observer
}

func (o *observedReservation) Commit(ctx context.Context) error {
	return o.call(ctx, StoreCommit, o.r.Commit)
}

func (o *observedReservation) Release(ctx context.Context) error {
	return o.call(ctx, StoreRelease, o.r.Release)
}

func (o *observedReservation) call(ctx context.Context, op StoreOp, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	o.obs.StoreCalled(ctx, StoreEvent{Op: op, Outcome: storeOutcome(err), Duration: time.Since(start)})
	return err
}

func storeOutcome(err error) StoreOutcome {
	switch {
	case err == nil:
		return StoreOK
	case errors.Is(err, replay.ErrReplayed):
		return StoreReplayed
	case errors.Is(err, context.DeadlineExceeded):
		return StoreTimeout
	}
	return StoreError
}
