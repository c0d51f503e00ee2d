package audit

import (
	"context"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/task"
)

// A Writer is a task.Observer too (task.Options.Observer): one line per
// task created (task_created), input asked (task_input, with inputs),
// answers taken (task_updated, with answers), end of its work
// (task_completed, with outcome and error_code), cancellation
// (task_cancelled), and refused tasks/* request or ignored answers
// (rejected, with reason unknown_task, missing_extension or
// answers_ignored, and the ignored answers' keys and actions).
//
// The lines have the fields of a paused call's: method (tools/call on
// the lines of the task's work, else the tasks/* method), target (the
// tool; empty on a tasks/* request, which names only the task),
// principal, client, args_digest (tools/call), node, request_id,
// upstream, trace_id; round is the task's input round. They never carry
// the task id: for an anonymous caller it is a bearer capability, and the
// trail is read by people who must not be able to take over a task. The
// task member is "hmac-sha256:" and the base64url HMAC-SHA256 of the id
// under a key derived from the ring's key (its own HKDF label, as the
// arguments digest's), so the lines of one task compare equal, and
// neither the id nor a guess of it can be checked without the ring.
// Answers' content, results, status messages and arguments are never
// written.
//
// Task lines are written and their errors counted (Options.OnError) like
// any other; Options.Required does not refuse a task's request, which
// the Observer cannot do.

var _ task.Observer = (*Writer)(nil)

// taskLine fills in what every task line says.
func (w *Writer) taskLine(ctx context.Context, e task.Event, event string) *Line {
	l := w.requestLine(event, e.Method, e.Target, e.Principal, e.Meta, e.RequestID)
	l.Forwarder = forwardedBy(ctx)
	l.taskID = e.TaskID
	return l
}

// writeTask writes l; a tools/call's line with its arguments digest.
func (w *Writer) writeTask(l *Line, c task.Call) {
	if c.Method == mcpwire.MethodCallTool {
		if h, err := c.ArgsHash(); err == nil {
			w.write(l, &h)
			return
		}
	}
	w.write(l, nil)
}

// TaskCreated writes a task_created line.
func (w *Writer) TaskCreated(ctx context.Context, e task.Event) {
	w.writeTask(w.taskLine(ctx, e, EventTaskCreated), e.Call)
}

// TaskInput writes a task_input line with the inputs' keys and methods.
func (w *Writer) TaskInput(ctx context.Context, e task.InputEvent) {
	l := w.taskLine(ctx, e.Event, EventTaskInput)
	l.Round = e.Round
	l.Inputs = make([]Input, len(e.Inputs))
	for i, in := range e.Inputs {
		l.Inputs[i] = Input{Key: mcpwire.Shown(in.Key), Method: mcpwire.Shown(in.Method)}
	}
	w.writeTask(l, e.Call)
}

// TaskUpdated writes a task_updated line with the answers' keys and
// actions.
func (w *Writer) TaskUpdated(ctx context.Context, e task.UpdateEvent) {
	l := w.taskLine(ctx, e.Event, EventTaskUpdated)
	l.Answers = taskAnswers(e.Answers)
	w.writeTask(l, e.Call)
}

// TaskEnded writes a task_completed line with the outcome.
func (w *Writer) TaskEnded(ctx context.Context, e task.EndEvent) {
	l := w.taskLine(ctx, e.Event, EventTaskCompleted)
	l.Round = e.Rounds
	l.Outcome = string(e.Outcome)
	if e.Outcome == mrtr.OutcomeError {
		l.ErrorCode = int(e.ErrorCode)
	}
	w.writeTask(l, e.Call)
}

// TaskCancelled writes a task_cancelled line.
func (w *Writer) TaskCancelled(ctx context.Context, e task.Event) {
	w.writeTask(w.taskLine(ctx, e, EventTaskCancelled), e.Call)
}

// TaskRejected writes a rejected line with the reason, and the ignored
// answers' keys and actions.
func (w *Writer) TaskRejected(ctx context.Context, e task.RejectEvent) {
	l := w.taskLine(ctx, e.Event, EventRejected)
	l.Reason = string(e.Reason)
	l.Answers = taskAnswers(e.Answers)
	w.writeTask(l, e.Call)
}

func taskAnswers(as []mrtr.Answer) []Answer {
	var out []Answer
	for _, a := range as {
		out = append(out, Answer{Key: mcpwire.Shown(a.Key), Action: a.Action})
	}
	return out
}
