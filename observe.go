package mrtr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sjson "github.com/segmentio/encoding/json"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
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
// Events carry no token, no continuation, no argument value and no
// answer's content. They do name the caller (Call.Principal, the issuer
// and subject of the verified credential: identifiers, not credentials)
// and, through methods that compute them only when asked, the flow id
// (Call.FlowID), the SHA-256 of the canonical arguments (Call.ArgsHash,
// which a holder can confirm a guessed value against: MAC it before
// recording it, as package audit does) and the answers' keys and actions
// (ResumeEvent.Answers). Method, Target, RequestID and Meta come from the
// request: an Observer that turns one into a metric label must bound its
// values itself.
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
	// Principal is the caller, from verified credentials (Request.Principal).
	Principal reqstate.Principal
	// RequestID is the request's JSON-RPC id as its JSON text
	// (Request.RequestID); "" when the adapter does not know it.
	RequestID string

	flow   reqstate.ID     // the flow id, when known
	args   json.RawMessage // the arguments, for ArgsHash
	hash   reqstate.Hash   // their hash, when hashed
	hashed bool
}

// FlowID returns the flow id the event belongs to: the id sealed in the
// token of a resume (accepted, or refused after it opened: expired,
// arguments_changed, rounds_exceeded, replayed), or the id a pause
// assigned; "" when there is none (a first call that did not pause, a
// token that did not open).
func (c Call) FlowID() string {
	if c.flow.IsZero() {
		return ""
	}
	return c.flow.String()
}

// ArgsHash returns the hash the guard binds into every token: the SHA-256
// of the RFC 8785 form of the call's arguments (reqstate.HashArguments).
// It is computed on the first call that asks, when the guard has not
// already. It is not a value of the arguments, but anyone holding it can
// confirm a guess of them: record it only under a MAC (package audit).
func (c Call) ArgsHash() (reqstate.Hash, error) {
	if c.hashed {
		return c.hash, nil
	}
	return reqstate.HashArguments(c.args)
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
	// OpenedRound is the round of a token that opened but was refused
	// (expired, arguments_changed, rounds_exceeded, replayed): the token
	// is authentic, so its round is; 0 otherwise, and equal to Round
	// when accepted.
	OpenedRound int
	// KeyID is the id of the key that opened an accepted state ("" when
	// refused, or with a codec whose tokens do not name their key the way
	// reqstate's do).
	KeyID string
	// Duration is how long Begin took, the store's reserve included.
	Duration time.Duration

	asked   []string
	answers map[string]any
}

// Answers returns the key and action of each verified answer of an
// accepted resume, in the order the sealed round asked them; nil when
// refused. It reads only the action of each answer, never its content:
// an elicitation result's action (accept, decline or cancel; any other
// value is ActionOther), and ActionAccept for an answer without one (a
// sampling or roots result: the client answered).
func (e ResumeEvent) Answers() []Answer {
	var out []Answer
	for _, k := range e.asked {
		if v, ok := e.answers[k]; ok {
			out = append(out, Answer{Key: k, Action: actionOf(v)})
		}
	}
	return out
}

// Answer is one answer of a resume: the input request key it answers and
// its action.
type Answer struct {
	Key    string
	Action string
}

// The actions of an answer (ResumeEvent.Answers).
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
	ActionOther   = "other" // an action that is none of the three: the client's bytes are not repeated
)

// actionOf reads the action of an answer as an adapter passed it: raw
// JSON (the proxy), or an SDK's typed result, which is encoded to find
// its action member (only its action is kept).
func actionOf(v any) string {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := sjson.Marshal(v)
		if err != nil {
			return ActionOther
		}
		raw = b
	}
	return mcpwire.AnswerAction(raw)
}

// Input is one input request of a pause: its key and its method
// (elicitation/create, sampling/createMessage, roots/list).
type Input struct {
	Key    string
	Method string
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
	// Asked are the keys of the pause's input requests, as sealed. Read,
	// never change.
	Asked []string
	// Inputs are the same input requests with their methods, when the
	// adapter paused through Flow.PauseInputs; nil through Flow.Pause.
	Inputs []Input
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
	// Outcome is how the call answered, when it did not pause: as the
	// adapter reported it through Flow.Finish, else OutcomeComplete, or
	// OutcomeError when Failed. ErrorCode is the JSON-RPC code of an
	// OutcomeError (CodeInternalError when the adapter did not say).
	Outcome   CallOutcome
	ErrorCode int
	// Duration is the time from Begin to End.
	Duration time.Duration
}

// CallOutcome is how a call that did not pause answered.
type CallOutcome string

// The outcomes of a call that did not pause.
const (
	OutcomeComplete  CallOutcome = "complete"   // a result
	OutcomeToolError CallOutcome = "tool_error" // a tools/call result with isError
	OutcomeError     CallOutcome = "error"      // a JSON-RPC error
)

func (r *Request) call(start time.Time) Call {
	return Call{Method: r.Method, ProtocolVersion: r.ProtocolVersion, Target: r.Target, Meta: r.Meta, Start: start,
		Principal: r.Principal, RequestID: r.RequestID, args: r.Arguments}
}

// Auditor records what a Guard decided, for an audit trail (package
// audit): every resume decided, pause sealed and call answered. Its
// events are the Observer's; unlike an Observer, it can refuse a call:
// a non-nil error means the record was not kept and the call must not go
// on without it, and the guard then refuses the call with an error
// wrapping ErrAudit (adapters answer CodeInternalError). An Auditor that
// only counts its failures returns nil.
//
// The guard calls it synchronously, on the request's goroutine, before
// the Observer and before the client gets the answer the record
// describes: Resumed before the handler runs (an accepted resume that is
// not recorded releases its reservation and runs nothing), Paused before
// the sealed state is returned, and Ended before a call that did not
// pause is answered (through Flow.Finish, or at Flow.End when the
// adapter does not call Finish). A refused resume is refused whatever
// Resumed returns. An Auditor must be safe for concurrent use.
type Auditor interface {
	// Resumed records Begin's decision on a call that carried a
	// requestState.
	Resumed(ctx context.Context, e ResumeEvent) error
	// Paused records a pause that Flow.Pause sealed.
	Paused(ctx context.Context, e PauseEvent) error
	// Ended records how a call that Begin let through answered. It is
	// called once per call, for a call that paused too (e.Paused; its
	// pause was recorded by Paused).
	Ended(ctx context.Context, e EndEvent) error
}

// ErrAudit wraps the error of an Auditor that could not record a call:
// the guard refused it (adapters answer CodeInternalError with a generic
// message). See Options.Auditor.
var ErrAudit = errors.New("mrtr: the audit trail could not record the call")

// OutcomeAuditUnavailable is the Observer's outcome of a resume the guard
// accepted but refused because its Auditor could not record it.
const OutcomeAuditUnavailable Outcome = "audit_unavailable"

func auditError(err error) error { return fmt.Errorf("%w: %w", ErrAudit, err) }

// observeBegin runs Begin and reports its decision on a resume. It is only
// called with an Observer or an Auditor set.
func (g *Guard) observeBegin(ctx context.Context, r *Request) (*Flow, error) {
	start := time.Now()
	// One allocation, as without an Observer: the Flow and what the
	// events need of it.
	fo := &struct {
		f Flow
		o flowObs
	}{o: flowObs{ctx: ctx, start: start, meta: r.Meta, requestID: r.RequestID}}
	f, err := g.begin(ctx, r, &fo.f)
	if f != nil {
		f.obs = &fo.o
	}
	if (r.RequestState == "" && !r.BadState) || errors.Is(err, ErrInvalidResponses) {
		return f, err // a first call, or malformed params: no token was judged
	}
	e := ResumeEvent{Call: r.call(start), Outcome: OutcomeOK}
	e.flow, e.hash, e.hashed = fo.f.flowID, fo.f.argsHash, fo.f.hashed
	switch re := err.(type) { // begin returns a *RejectError unwrapped
	case nil:
		e.Round, e.OpenedRound = f.round, f.round
		e.KeyID = reqstate.TokenKeyID(r.RequestState)
		e.asked, e.answers = f.asked, f.answers
	case *RejectError:
		e.Outcome = Outcome(re.Reason)
		e.OpenedRound = fo.f.round // set by begin once the token opened
	default:
		e.Outcome = OutcomeStoreUnavailable
		if errors.Is(err, ErrInvalidArguments) {
			e.Outcome = OutcomeInvalidArguments
		}
	}
	e.Duration = time.Since(start)
	if a := g.opts.Auditor; a != nil {
		if aerr := a.Resumed(ctx, e); aerr != nil && err == nil {
			f.abandon(ctx)
			f, err = nil, auditError(aerr)
			e.Outcome = OutcomeAuditUnavailable
		}
	}
	if o := g.opts.Observer; o != nil {
		o.Resumed(ctx, e)
	}
	return f, err
}

// abandon releases the reservation of a resume the guard refuses after
// accepting it, so that the user can send the same requestState again.
func (f *Flow) abandon(ctx context.Context) {
	f.mu.Lock()
	f.ended, f.observed = true, true
	f.mu.Unlock()
	if f.res == nil {
		return
	}
	sctx, cancel := f.g.storeContext(context.WithoutCancel(ctx))
	defer cancel()
	if err := f.res.Release(sctx); err != nil {
		f.g.opts.Logger.ErrorContext(ctx, "mrtr: single-use store release failed; the token stays reserved until it expires",
			"method", mcpwire.Shown(f.binding.Method), "target", mcpwire.Shown(f.binding.Target), "flow", f.flowID.String(), "error", err)
	}
}

// observePause reports a sealed pause, with Begin's context (Pause has
// none of its own), to the Auditor and then the Observer. An Auditor's
// error refuses the pause. Called with f.mu held.
func (f *Flow) observePause(tok string, asked []string, inputs []Input) error {
	ctx := context.Background()
	if f.obs != nil {
		ctx = f.obs.ctx
	}
	e := PauseEvent{
		Call:       f.call(),
		Round:      f.round + 1,
		KeyID:      reqstate.TokenKeyID(tok),
		TokenBytes: len(tok),
		Asked:      asked,
		Inputs:     inputs,
	}
	if a := f.g.opts.Auditor; a != nil {
		if err := a.Paused(ctx, e); err != nil {
			return auditError(err)
		}
	}
	if o := f.g.opts.Observer; o != nil {
		o.Paused(ctx, e)
	}
	return nil
}

// call describes f's call for an event. Called with f.mu held.
func (f *Flow) call() Call {
	c := Call{Method: f.binding.Method, ProtocolVersion: f.binding.ProtocolVersion, Target: f.binding.Target,
		Principal: f.binding.Principal, flow: f.flowID, args: f.args, hash: f.argsHash, hashed: f.hashed}
	if f.obs != nil {
		c.Meta, c.Start, c.RequestID = f.obs.meta, f.obs.start, f.obs.requestID
	}
	return c
}

// Finish reports how a call that did not pause answered, before the
// adapter sends the answer: its outcome, and the JSON-RPC code of an
// OutcomeError (0 otherwise). With an Options.Auditor the call is
// recorded now rather than at End, and Finish returns an error wrapping
// ErrAudit when it was not: the adapter then answers CodeInternalError
// instead, and still ends the flow with the handler's own error (nil for
// a handler that answered), so that the token of a handler that ran is
// spent. Without an Auditor or an Observer it does nothing.
//
// Finish is optional and only the first call counts; End without it
// reports OutcomeComplete, or OutcomeError with CodeInternalError when
// its handlerErr is not nil. It does nothing on a call that paused.
func (f *Flow) Finish(ctx context.Context, outcome CallOutcome, code int) error {
	if f.obs == nil {
		return nil
	}
	f.mu.Lock()
	if f.obs.finished || f.paused {
		f.mu.Unlock()
		return nil
	}
	f.obs.finished, f.obs.outcome, f.obs.code = true, outcome, code
	e := f.endEvent(nil)
	f.mu.Unlock()
	a := f.g.opts.Auditor
	if a == nil {
		return nil
	}
	f.obs.recorded = true // only this goroutine reads it, at End
	if err := a.Ended(ctx, e); err != nil {
		return auditError(err)
	}
	return nil
}

// endEvent describes the end of f's call. Called with f.mu held.
func (f *Flow) endEvent(handlerErr error) EndEvent {
	e := EndEvent{Call: f.call(), Resumed: f.resumed, Round: f.round, Paused: f.paused, Failed: handlerErr != nil}
	if f.paused {
		e.KeyID, e.TokenBytes = reqstate.TokenKeyID(f.token), len(f.token)
	} else {
		switch {
		case f.obs != nil && f.obs.finished:
			e.Outcome, e.ErrorCode = f.obs.outcome, f.obs.code
		case handlerErr != nil:
			e.Outcome, e.ErrorCode = OutcomeError, CodeInternalError
		default:
			e.Outcome = OutcomeComplete
		}
	}
	if f.obs != nil && !f.obs.start.IsZero() {
		e.Duration = time.Since(f.obs.start)
	}
	return e
}

// observeEnd runs End and reports the call's end, once: to the Auditor,
// unless Finish has, and to the Observer. An Auditor's error is returned,
// wrapped in ErrAudit, unless End has an error of its own.
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
	e := f.endEvent(handlerErr)
	f.mu.Unlock()
	if a := f.g.opts.Auditor; a != nil && (f.obs == nil || !f.obs.recorded) {
		if aerr := a.Ended(ctx, e); aerr != nil && err == nil {
			err = auditError(aerr)
		}
	}
	if o := f.g.opts.Observer; o != nil {
		o.Ended(ctx, e)
	}
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
