package task

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Observer receives what a Manager does with its tasks, for metrics,
// traces and an audit trail (Options.Observer): a task created, input
// asked inside it, answers taken, its end, its cancellation, and every
// tasks/* request refused. It is the guard's mrtr.Observer for tasks; its
// methods are named Task* so that one type can implement both (as the
// command's metrics, tracer and audit writer do).
//
// A Manager calls it synchronously: Created before the CreateTaskResult
// is returned, Input before the work waits for its answers, Updated,
// Cancelled and Rejected before the tasks/* request is answered, Ended
// when the work's end is recorded. So an Observer must be safe for
// concurrent use and quick (count, record, never block for long).
//
// Events carry no answer's content, no result, no argument value and no
// statusMessage. They do carry the task id (Event.TaskID), which for an
// anonymous caller is a bearer capability: whoever holds it reads,
// answers and cancels the task. Never record or export it as it is: MAC
// it, as package audit does.
//
// Embed NopObserver in an implementation so that it keeps compiling when
// this interface gains a method.
type Observer interface {
	// TaskCreated reports a task made durable in the store by Start.
	TaskCreated(ctx context.Context, e Event)
	// TaskInput reports input requests a task's work asked (Run.Ask),
	// once they are in the store.
	TaskInput(ctx context.Context, e InputEvent)
	// TaskUpdated reports the answers a tasks/update delivered and the
	// store took (at least one).
	TaskUpdated(ctx context.Context, e UpdateEvent)
	// TaskEnded reports the end of a task's work recorded by this node:
	// completed (a result or a tool error) or failed. A task cancelled
	// first, or whose lease this node lost, has no TaskEnded.
	TaskEnded(ctx context.Context, e EndEvent)
	// TaskCancelled reports a task a tasks/cancel turned cancelled.
	TaskCancelled(ctx context.Context, e Event)
	// TaskRejected reports a tasks/* request refused, or answers of a
	// tasks/update ignored.
	TaskRejected(ctx context.Context, e RejectEvent)
}

// NopObserver does nothing. Embed it in an Observer to implement only
// some methods.
type NopObserver struct{}

// TaskCreated does nothing.
func (NopObserver) TaskCreated(context.Context, Event) {}

// TaskInput does nothing.
func (NopObserver) TaskInput(context.Context, InputEvent) {}

// TaskUpdated does nothing.
func (NopObserver) TaskUpdated(context.Context, UpdateEvent) {}

// TaskEnded does nothing.
func (NopObserver) TaskEnded(context.Context, EndEvent) {}

// TaskCancelled does nothing.
func (NopObserver) TaskCancelled(context.Context, Event) {}

// TaskRejected does nothing.
func (NopObserver) TaskRejected(context.Context, RejectEvent) {}

// Call describes the request an event belongs to, as an adapter read it
// (WithCall). Every field comes from the untrusted request but Principal,
// which comes from verified credentials.
type Call struct {
	// Method is tools/call for the request that created a task, or the
	// tasks/* method.
	Method string
	// ProtocolVersion is the MCP protocol version of the request.
	ProtocolVersion string
	// Target is the tool name of the tools/call that created the task;
	// "" for a tasks/* request, which names only the task.
	Target string
	// Principal is the caller. A Manager sets it from the task's key.
	Principal reqstate.Principal
	// RequestID is the request's JSON-RPC id as its JSON text; "" when
	// the adapter does not know it.
	RequestID string
	// Meta is the request's _meta: clientInfo, and the W3C trace context
	// (traceparent, tracestate). Read it, never change it.
	Meta map[string]any
	// Start is when the request came in; WithCall sets it when zero.
	Start time.Time

	args json.RawMessage // the tool's arguments (WithCall), for ArgsHash
}

// ArgsHash returns the SHA-256 of the RFC 8785 form of the call's
// arguments (reqstate.HashArguments), as the guard's mrtr.Call.ArgsHash
// does: not a value, but anyone holding it can confirm a guess of one:
// record it only under a MAC.
func (c Call) ArgsHash() (reqstate.Hash, error) { return reqstate.HashArguments(c.args) }

type callKey struct{}

// WithCall returns ctx carrying what a Manager's events say of the request
// it serves: the tools/call whose handler calls Start (with its arguments,
// which events never show: only Call.ArgsHash reads them), or the tasks/*
// request served by Get, Update and Cancel (arguments nil). Adapters set
// it; without it an event names only the method, the principal and the
// task.
func WithCall(ctx context.Context, c Call, arguments json.RawMessage) context.Context {
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	c.args = arguments
	return context.WithValue(ctx, callKey{}, &c)
}

// callFrom returns the Call of ctx, method when ctx has none, with the
// principal p.
func callFrom(ctx context.Context, method string, p reqstate.Principal) Call {
	var c Call
	if v, ok := ctx.Value(callKey{}).(*Call); ok {
		c = *v
	} else {
		c.Method, c.Start = method, time.Now()
	}
	c.Principal = p
	return c
}

// Event is what every event says: the request and the task.
type Event struct {
	Call
	// TaskID is the task's id; "" on a refusal that names none. For an
	// anonymous caller it is a bearer capability: never record it as it
	// is (see Observer).
	TaskID string
}

// InputEvent is input asked inside a task. Its Call is the tools/call
// that created the task.
type InputEvent struct {
	Event
	// Inputs are the requests asked, in key order: key and method
	// (elicitation/create, sampling/createMessage, roots/list).
	Inputs []mrtr.Input
	// Round counts the task's Ask calls: 1 for the first.
	Round int
}

// UpdateEvent is a tasks/update whose answers the store took.
type UpdateEvent struct {
	Event
	// Answers are those taken, in key order, with their actions
	// (mrtr.ActionAccept, ...: never their content).
	Answers []mrtr.Answer
}

// EndEvent is the end of a task's work as this node recorded it. Its
// Call is the tools/call that created the task.
type EndEvent struct {
	Event
	// Outcome is that of a call that did not pause: mrtr.OutcomeComplete
	// (a result), mrtr.OutcomeToolError (a result with isError) or
	// mrtr.OutcomeError (a JSON-RPC error: the task failed).
	Outcome mrtr.CallOutcome
	// ErrorCode is the JSON-RPC code of OutcomeError.
	ErrorCode int64
	// Rounds counts the input rounds the work asked (Run.Ask).
	Rounds int
	// Duration is the task's life, from Start to its end.
	Duration time.Duration
}

// Reason is why a tasks/* request, or some of its answers, was refused.
type Reason string

// The reasons of a RejectEvent.
const (
	// ReasonMissingExtension: the request did not declare the extension
	// (-32021), before anything was looked up.
	ReasonMissingExtension Reason = "missing_extension"
	// ReasonUnknownTask: no task of the caller's under the id (unknown,
	// expired, another caller's or server's alike: -32602).
	ReasonUnknownTask Reason = "unknown_task"
	// ReasonAnswersIgnored: answers of a tasks/update to keys the task
	// does not have outstanding, or of the wrong shape, were ignored (the
	// request itself is answered as the extension says).
	ReasonAnswersIgnored Reason = "answers_ignored"
)

// MaxIgnoredAnswers bounds RejectEvent.Answers: a client chooses how many
// keys it sends.
const MaxIgnoredAnswers = 16

// RejectEvent is a tasks/* request refused, or answers ignored.
type RejectEvent struct {
	Event
	Reason Reason
	// Answers are the answers ignored (ReasonAnswersIgnored), in key
	// order, at most MaxIgnoredAnswers.
	Answers []mrtr.Answer
}

// Rejected reports a tasks/* request an adapter refused before the
// Manager saw it (ReasonMissingExtension: the gate comes before any
// lookup), to Options.Observer. p is the caller when known.
func (m *Manager) Rejected(ctx context.Context, p reqstate.Principal, method string, reason Reason) {
	if o := m.o.Observer; o != nil {
		o.TaskRejected(ctx, RejectEvent{Event: Event{Call: callFrom(ctx, method, p)}, Reason: reason})
	}
}

// answersOf lists the answers under keys, in order, at most limit (0:
// all).
func answersOf(answers map[string]json.RawMessage, keys []string, limit int) []mrtr.Answer {
	var out []mrtr.Answer
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, mrtr.Answer{Key: k, Action: mcpwire.AnswerAction(answers[k])})
	}
	return out
}

// outcomeOf reads how a task ended from what its work returned.
func outcomeOf(res json.RawMessage, end End) (mrtr.CallOutcome, int64) {
	if end.Status == Failed {
		var e struct {
			Code int64 `json:"code"`
		}
		json.Unmarshal(end.Error, &e)
		return mrtr.OutcomeError, e.Code
	}
	if v, ok := mcpwire.Member(mcpwire.TrimSpace(res), "isError"); ok && string(mcpwire.TrimSpace(v)) == "true" {
		return mrtr.OutcomeToolError, 0
	}
	return mrtr.OutcomeComplete, 0
}
