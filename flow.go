package mrtr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	sjson "github.com/segmentio/encoding/json"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Flow is what a handler sees of one call in a multi-round flow: whether
// it resumes a pause, the round, a flow id stable across rounds, the
// verified continuation and the answers to the questions the sealed round
// asked. A handler pauses through Pause and never handles a raw token.
//
// A Flow belongs to one call; its methods are safe for concurrent use.
type Flow struct {
	g       *Guard
	binding reqstate.Binding
	args    json.RawMessage

	round      int
	flowID     reqstate.ID
	cont       json.RawMessage
	asked      []string
	answers    map[string]any // may be Request.InputResponses itself (answersOf)
	unverified map[string]any
	argsHash   reqstate.Hash
	res        replay.Reservation
	obs        *flowObs // set only with an Observer (observe.go)

	mu     sync.Mutex
	token  string // the sealed pause, once Pause succeeded
	paused bool
	ended  bool

	resumed  bool
	hashed   bool
	observed bool // Observer.Ended was called; guarded by mu
}

// flowObs is what the Observer's events need of a Flow beyond the rest of
// it, kept apart so a guard without an Observer does not allocate it.
type flowObs struct {
	ctx       context.Context // Begin's, for Observer.Paused
	start     time.Time
	meta      map[string]any
	requestID string

	// What Finish reported, guarded by the Flow's mu.
	finished bool
	outcome  CallOutcome
	code     int
	recorded bool // the Auditor recorded the end (Finish)
}

// Resumed reports whether this call carried a verified requestState.
func (f *Flow) Resumed() bool { return f.resumed }

// Round is the number of pauses so far: 0 on a first call, n when
// resuming the state issued by the flow's nth pause.
func (f *Flow) Round() int { return f.round }

// ID is the flow id, constant across all rounds of one flow and unique
// per flow (128 random bits). On a first call it is assigned when the flow
// first pauses (empty before).
//
// Use it, with Round, as the idempotency key of a side effect: single use
// guarantees at most one successful run per token, not one run. A handler
// that fails releases its token (unless Options.ConsumeOnError), so the
// user's retry runs the handler again on the same token, after whatever
// the failed run already did; without a store, a token may be resumed
// again and again until it expires. Record the key with the side effect,
// atomically (a unique column, a conditional write), and skip the effect
// when the key is already there.
func (f *Flow) ID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flowID.IsZero() {
		return ""
	}
	return f.flowID.String()
}

// Asked returns the input request keys the resumed round asked.
func (f *Flow) Asked() []string { return append([]string(nil), f.asked...) }

// Continuation decodes the verified continuation into v. It returns
// ErrNoContinuation on a first call or when the pause sealed none. A
// *json.RawMessage receives the sealed JSON as is, without decoding.
func (f *Flow) Continuation(v any) error {
	if len(f.cont) == 0 {
		return ErrNoContinuation
	}
	if raw, ok := v.(*json.RawMessage); ok {
		// The sealed JSON as is: authenticated, so valid; no decoding.
		*raw = append((*raw)[:0], f.cont...)
		return nil
	}
	if err := sjson.Unmarshal(f.cont, v); err != nil {
		return fmt.Errorf("mrtr: continuation does not decode into %T", v) // the decoder's error quotes the sealed value
	}
	return nil
}

// ErrNoContinuation is returned by Continuation when there is none.
var ErrNoContinuation = errors.New("mrtr: no continuation")

// Decode returns the flow's verified continuation as a T. ok is false on
// a first call (or a pause without continuation); err reports a
// continuation that does not decode into T.
func Decode[T any](f *Flow) (v T, ok bool, err error) {
	if err := f.Continuation(&v); err != nil {
		if errors.Is(err, ErrNoContinuation) {
			return v, false, nil
		}
		return v, false, err
	}
	return v, true, nil
}

// Answer returns the client's answer under key, only if the sealed round
// asked for key. On a first call there are no verified answers.
func (f *Flow) Answer(key string) (any, bool) {
	v, ok := f.answers[key]
	return v, ok
}

// Answers returns a copy of the verified answers.
func (f *Flow) Answers() map[string]any { return maps.Clone(f.answers) }

// Unverified returns an answer sent on a call that carried no
// requestState: nobody asked for it in a sealed round, so the handler
// decides whether it may use it (a stateless tool may; a tool relying on
// its continuation should ask properly first).
func (f *Flow) Unverified(key string) (any, bool) {
	v, ok := f.unverified[key]
	return v, ok
}

// Pause seals the flow's next round: continuation (any value that
// encodes to JSON; nil for none) and the keys of the input requests the
// handler is about to send. It returns the requestState to send with them.
// A flow that has already paused MaxRounds times gets a *RejectError with
// ReasonRoundsExceeded instead.
//
// Adapters call Pause for the handler; most handlers never call it
// directly. A Flow pauses at most once. With an Options.Auditor that
// cannot record the pause, Pause returns an error wrapping ErrAudit and
// the flow has not paused.
func (f *Flow) Pause(continuation any, asked ...string) (string, error) {
	return f.pause(continuation, asked, nil)
}

// PauseInputs is Pause with each input request's method beside its key,
// for the Observer and the Auditor (PauseEvent.Inputs); only the keys are
// sealed. Adapters that know the methods pause through it.
func (f *Flow) PauseInputs(continuation any, inputs ...Input) (string, error) {
	asked := make([]string, len(inputs))
	for i, in := range inputs {
		asked[i] = in.Key
	}
	return f.pause(continuation, asked, inputs)
}

func (f *Flow) pause(continuation any, asked []string, inputs []Input) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused {
		return "", errors.New("mrtr: Flow paused twice in one call")
	}
	g := f.g
	next := f.round + 1
	if next > g.opts.MaxRounds {
		g.opts.Logger.Warn("mrtr: flow reached the round cap", "method", mcpwire.Shown(f.binding.Method), "target", mcpwire.Shown(f.binding.Target), "rounds", f.round)
		return "", reject(ReasonRoundsExceeded)
	}
	var cont json.RawMessage
	switch c := continuation.(type) {
	case nil:
	case json.RawMessage:
		cont = c
	default:
		b, err := sjson.Marshal(c)
		if err != nil {
			return "", fmt.Errorf("mrtr: encode continuation: %w", err)
		}
		cont = b
	}
	if !f.hashed {
		h, err := reqstate.HashArguments(f.args)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidArguments, err)
		}
		f.argsHash, f.hashed = h, true
	}
	if f.flowID.IsZero() {
		id, err := reqstate.NewID(g.opts.Rand)
		if err != nil {
			return "", err
		}
		f.flowID = id
	}
	now := g.opts.Now()
	ttl := g.opts.TTL
	if f.binding.Principal.Anonymous() {
		ttl = g.opts.AnonymousTTL
	}
	st := reqstate.State{
		Continuation: cont,
		Round:        next,
		IssuedAt:     now,
		ExpiresAt:    now.Add(ttl),
		FlowID:       f.flowID,
		ArgsHash:     f.argsHash,
		Asked:        asked,
	}
	tok, err := seal(g.codec, f.binding, &st)
	if err != nil {
		return "", fmt.Errorf("mrtr: seal pause: %w", err)
	}
	// Paused before the event, which describes the flow as paused (the
	// round sealed, the flow id assigned); undone if it cannot be recorded.
	f.token, f.paused = tok, true
	if g.watched {
		if err := f.observePause(tok, asked, inputs); err != nil {
			f.token, f.paused = "", false
			return "", err
		}
	}
	return tok, nil
}

// seal seals s with codec. reqstate's own codec is called directly, so
// that s, which it does not keep, stays on the caller's stack; through the
// interface it would be allocated on every pause. Another Codec seals a
// copy.
func seal(codec reqstate.Codec, b reqstate.Binding, s *reqstate.State) (string, error) {
	if c, ok := codec.(*reqstate.AESGCM); ok {
		return c.Seal(b, s)
	}
	cp := *s
	return codec.Seal(b, &cp)
}

// Paused reports whether Pause succeeded, and the sealed state.
func (f *Flow) Paused() (requestState string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token, f.paused
}

// End settles the call's single-use reservation, if any: committed when
// handlerErr is nil (the handler ran and answered, whether it completed or
// paused again) or when Options.ConsumeOnError is set, released otherwise
// so the user can retry with the same token. It uses a context that
// outlives ctx (a client hanging up must not cancel the commit), bounded by
// Options.StoreTimeout.
//
// End is idempotent. A commit or release that fails is logged and
// returned, and is safe to ignore: the reservation then holds until the
// token expires, so a failed commit never lets the token run its handler
// again, and a failed release only costs the user the token. Adapters
// therefore answer with the handler's result even when End fails.
func (f *Flow) End(ctx context.Context, handlerErr error) error {
	if f.g.watched {
		return f.observeEnd(ctx, handlerErr)
	}
	return f.end(ctx, handlerErr)
}

func (f *Flow) end(ctx context.Context, handlerErr error) error {
	f.mu.Lock()
	if f.ended || f.res == nil {
		f.ended = true
		f.mu.Unlock()
		return nil
	}
	f.ended = true
	f.mu.Unlock()
	g := f.g
	// The request's context may be canceled by now; settling must not be.
	sctx, cancel := g.storeContext(context.WithoutCancel(ctx))
	defer cancel()
	var err error
	op := "commit"
	if handlerErr == nil || g.opts.ConsumeOnError {
		err = f.res.Commit(sctx)
	} else {
		op = "release"
		err = f.res.Release(sctx)
	}
	if err != nil {
		g.opts.Logger.ErrorContext(ctx, "mrtr: single-use store "+op+" failed; the token stays reserved until it expires",
			"method", mcpwire.Shown(f.binding.Method), "target", mcpwire.Shown(f.binding.Target), "flow", f.flowID.String(), "error", err)
		return fmt.Errorf("mrtr: %s reservation: %w", op, err)
	}
	return nil
}

// Continuations are encoded and decoded with segmentio/encoding/json, the
// JSON library go-sdk itself uses: it is a drop-in for encoding/json with
// the same results for the values a handler seals, and about four times
// faster for a typical continuation struct (Marshal+Unmarshal of a 300-byte
// struct: 1.0 us against 4.2 us on the benchmark machine), which is most
// of the cost of a pause and resume. See docs/BENCHMARKS.md.

type flowKey struct{}

// NewContext returns ctx carrying f, for handlers behind an adapter.
func NewContext(ctx context.Context, f *Flow) context.Context {
	return context.WithValue(ctx, flowKey{}, f)
}

// FromContext returns the Flow of the call ctx belongs to, or nil.
func FromContext(ctx context.Context) *Flow {
	f, _ := ctx.Value(flowKey{}).(*Flow)
	return f
}
