package mrtr

import (
	"errors"
	"fmt"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// Reason says why a requestState was rejected. It is sent to the client in
// the error's data, so only reasons that cannot help a forger exist: every
// failure before authentication is ReasonInvalid.
type Reason string

// The reasons of the error contract.
const (
	ReasonInvalid          Reason = "invalid"           // not a token we sealed for this call and caller
	ReasonExpired          Reason = "expired"           // authentic, but outside its validity window
	ReasonReplayed         Reason = "replayed"          // authentic, but already used (single-use store)
	ReasonRoundsExceeded   Reason = "rounds_exceeded"   // the flow paused more than MaxRounds times
	ReasonArgumentsChanged Reason = "arguments_changed" // authentic, but the retry's arguments differ
)

// RejectMessage is the one fixed message of every rejected requestState:
// "invalid requestState".
const RejectMessage = mcpwire.RejectMessage

// CodeInvalidParams is the JSON-RPC code of a rejected requestState
// (-32602).
const CodeInvalidParams = mcpwire.CodeInvalidParams

// CodeInternalError is the JSON-RPC code of a single-use store outage
// (-32603).
const CodeInternalError = mcpwire.CodeInternalError

// RejectError is the error of a rejected requestState. Adapters send it as
// JSON-RPC error CodeInvalidParams with message RejectMessage and data
// {"reason": Reason}. Match it with errors.As, or with errors.Is against
// ErrRejected.
type RejectError struct {
	Reason Reason
}

func (e *RejectError) Error() string { return fmt.Sprintf("mrtr: %s (%s)", RejectMessage, e.Reason) }

// Is makes errors.Is(err, ErrRejected) true for every RejectError.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// ErrRejected matches every *RejectError under errors.Is.
var ErrRejected = errors.New("mrtr: " + RejectMessage)

// ErrStoreUnavailable reports that the single-use store could not decide.
// The guard fails closed: adapters answer CodeInternalError with one fixed
// message that says to try again and nothing of the cause, and the
// handler does not run.
var ErrStoreUnavailable = errors.New("mrtr: single-use store unavailable")

// ErrInvalidArguments wraps the error of a call whose arguments cannot be
// bound into a requestState: JSON that the arguments hash (RFC 8785,
// reqstate.HashArguments) refuses, such as a number with more precision
// than an IEEE 754 double (reqstate.ErrInexactNumber). Pause returns it on
// a first call, Begin on a resume. Adapters answer CodeInvalidParams with
// a message naming the rule, never the arguments.
var ErrInvalidArguments = errors.New("mrtr: invalid arguments")

// ErrInvalidResponses refuses a call whose inputResponses are present but
// not an object of answers (null, {}, or no object at all): a retry must
// carry the answers it retries with. Adapters answer CodeInvalidParams
// with a message saying so.
var ErrInvalidResponses = errors.New("mrtr: inputResponses must be an object of answers")

// ErrHandlerState reports a handler that set a result's requestState by
// hand instead of pausing through its Flow: it would have sent a state
// nobody sealed.
var ErrHandlerState = errors.New("mrtr: handler set requestState itself; pause through the Flow instead")

func reject(r Reason) error { return &RejectError{Reason: r} }
