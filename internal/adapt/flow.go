package adapt

import (
	"context"
	"errors"
	"log/slog"
	"reflect"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// ErrStaleContinuation is what the client gets when a verified
// continuation no longer decodes into the handler's continuation type (a
// deploy changed the type while tokens were live): a fixed message, never
// the sealed value; the token is released. The adapter's logger names the
// Go type.
var ErrStaleContinuation = errors.New("this paused call cannot be resumed by this version of the server; start the call again")

// Flow is the SDK-free part of a handler's typed view of one call: the
// verified continuation as a C, the round, the flow id, and the sealing
// of the next round behind the capability gate. The adapters keep it in
// their own Flow, which declares these methods again (so that go doc shows
// them) and adds the answers and Ask in their SDK's types.
//
// Its methods are the ones an adapter's Flow shows its users; the rest are
// functions of this package.
//
// A Flow belongs to one call; it is safe for concurrent use.
type Flow[C any] struct {
	f       *mrtr.Flow
	state   C
	hasCont bool
	call    *Call
	rec     *Record // nil: the adapter does not record sealed states
}

// NewFlow decodes f's continuation as a C. A continuation that does not
// decode is ErrStaleContinuation; only its Go type is logged.
func NewFlow[C any](ctx context.Context, f *mrtr.Flow, c *Call, rec *Record, logger *slog.Logger) (*Flow[C], error) {
	fl := &Flow[C]{f: f, call: c, rec: rec}
	// Decoded straight into fl, which is on the heap already: through a
	// local, as mrtr.Decode does, the value would be allocated again.
	err := f.Continuation(&fl.state)
	ok := err == nil
	if errors.Is(err, mrtr.ErrNoContinuation) {
		err = nil
	}
	if err != nil {
		// The decode error quotes the sealed value: it reaches neither the
		// client nor the log; only the Go type is logged.
		if logger != nil {
			logger.ErrorContext(ctx, "mrtr: a verified continuation does not decode into the handler's continuation type (changed while tokens were live?)",
				"method", c.Method, "target", c.Target, "type", reflect.TypeFor[C]().String())
		}
		return nil, ErrStaleContinuation
	}
	fl.hasCont = ok
	return fl, nil
}

// Resumed reports whether the call carried a verified requestState.
func (f *Flow[C]) Resumed() bool { return f.f.Resumed() }

// Round is the number of pauses so far: 0 on a first call.
func (f *Flow[C]) Round() int { return f.f.Round() }

// ID is the flow id, constant across the rounds of one flow: an
// idempotency key for side effects. It is empty on a first call until the
// flow pauses.
func (f *Flow[C]) ID() string { return f.f.ID() }

// Asked returns the input request keys the resumed round asked.
func (f *Flow[C]) Asked() []string { return f.f.Asked() }

// State returns the verified continuation sealed by the previous pause,
// and false on a first call (or when that pause sealed none).
func (f *Flow[C]) State() (C, bool) { return f.state, f.hasCont }

// The functions below are what an adapter's Flow builds on; they are not
// methods, so that they are not promoted into the adapter's public API.

// Answer returns the verified answer under key, in the SDK's type: only a
// key the sealed round asked.
func Answer[C any](f *Flow[C], key string) (any, bool) { return f.f.Answer(key) }

// Unverified returns an answer sent without any requestState.
func Unverified[C any](f *Flow[C], key string) (any, bool) { return f.f.Unverified(key) }

// Declared returns what the client of f's request declared it can answer.
func Declared[C any](f *Flow[C]) mcpwire.Caps { return f.call.Declared() }

// Pause seals the next round with state as its continuation and the keys
// of needs as the questions asked, after the capability gate: a need the
// client did not declare fails with the -32021 WireError. A zero state
// (nil, struct{}{}) seals no continuation.
func Pause[C any](f *Flow[C], state C, needs Needs) (string, error) {
	if err := Gate(f.call.Declared(), needs); err != nil {
		return "", err
	}
	var cont any = state
	if isZero(state) {
		cont = nil
	}
	tok, err := f.f.PauseInputs(cont, needs.Inputs()...)
	if err != nil {
		return "", err
	}
	if f.rec != nil {
		f.rec.Add(tok)
	}
	return tok, nil
}

func isZero[C any](v C) bool {
	switch x := any(v).(type) {
	case nil:
		return true
	case struct{}:
		return x == struct{}{}
	}
	return false
}

// Typed returns the answer under key as a T, only if the sealed round
// asked for key and the answer is a non-nil T.
func Typed[T any](v any, ok bool) (T, bool) {
	var zero T
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	if !ok || reflect.ValueOf(&t).Elem().IsZero() {
		return zero, false
	}
	return t, true
}
