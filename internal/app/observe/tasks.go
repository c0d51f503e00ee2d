package observe

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/task"
)

// Tasks (the io.modelcontextprotocol/tasks extension): Metrics and Tracer
// are task.Observers too (task.Options.Observer), and TaskObservers fans
// events out to several.
//
// Metrics (all prefixed mrtr_):
//
//	tasks_created_total                 tasks created
//	task_inputs_total                   input rounds asked inside tasks
//	task_answers_total{action}          answers taken: accept, decline, cancel, other
//	tasks_ended_total{outcome}          tasks ended: complete, tool_error, error (their work, on the
//	                                    node that ran it), cancelled (by tasks/cancel, on the node that served it)
//	task_rejections_total{reason}       tasks/* requests refused: unknown_task, missing_extension;
//	                                    and tasks/update requests with answers ignored: answers_ignored
//	task_duration_seconds{outcome}      a task's life, from creation to the end of its work (histogram)
//
// Every label value comes from a fixed set, "other" for anything else.

var (
	taskActions  = []string{mrtr.ActionAccept, mrtr.ActionDecline, mrtr.ActionCancel, mrtr.ActionOther}
	taskOutcomes = []string{string(mrtr.OutcomeComplete), string(mrtr.OutcomeToolError), string(mrtr.OutcomeError), outcomeCancelled}
	taskReasons  = []task.Reason{task.ReasonUnknownTask, task.ReasonMissingExtension, task.ReasonAnswersIgnored}
)

// outcomeCancelled is the outcome label of a task cancelled by tasks/cancel.
const outcomeCancelled = "cancelled"

// taskMetrics are the task metrics of a Metrics.
type taskMetrics struct {
	created    prometheus.Counter
	inputs     prometheus.Counter
	answers    *prometheus.CounterVec
	ended      *prometheus.CounterVec
	rejections *prometheus.CounterVec
	life       *prometheus.HistogramVec
}

func newTaskMetrics() (*taskMetrics, []prometheus.Collector) {
	t := &taskMetrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{Name: "mrtr_tasks_created_total",
			Help: "Tasks created (a tools/call answered with a CreateTaskResult)."}),
		inputs: prometheus.NewCounter(prometheus.CounterOpts{Name: "mrtr_task_inputs_total",
			Help: "Input rounds asked inside tasks (inputRequests set, status input_required)."}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mrtr_task_answers_total",
			Help: "Answers to tasks' input requests taken by tasks/update, by action: accept, decline, cancel, other."}, []string{"action"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mrtr_tasks_ended_total",
			Help: "Tasks ended, by outcome: complete, tool_error, error (recorded by the node running the work), cancelled (by tasks/cancel)."}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mrtr_task_rejections_total",
			Help: "tasks/* requests refused, by reason: unknown_task (-32602: unknown, expired, or another caller's), missing_extension (-32021); answers_ignored counts tasks/update requests some of whose answers were ignored."}, []string{"reason"}),
		life: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mrtr_task_duration_seconds",
			Help:    "A task's life, from its creation to the end of its work, by outcome, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"outcome"}),
	}
	for _, a := range taskActions {
		t.answers.WithLabelValues(a)
	}
	for _, o := range taskOutcomes {
		t.ended.WithLabelValues(o)
	}
	for _, r := range taskReasons {
		t.rejections.WithLabelValues(string(r))
	}
	return t, []prometheus.Collector{t.created, t.inputs, t.answers, t.ended, t.rejections, t.life}
}

var _ task.Observer = (*Metrics)(nil)

// TaskCreated counts a task.
func (m *Metrics) TaskCreated(context.Context, task.Event) { m.tasks.created.Inc() }

// TaskInput counts an input round.
func (m *Metrics) TaskInput(context.Context, task.InputEvent) { m.tasks.inputs.Inc() }

// TaskUpdated counts the answers taken, by action.
func (m *Metrics) TaskUpdated(_ context.Context, e task.UpdateEvent) {
	for _, a := range e.Answers {
		m.tasks.answers.WithLabelValues(bounded(a.Action, taskActions)).Inc()
	}
}

// TaskEnded counts a task's end by outcome and records its life.
func (m *Metrics) TaskEnded(_ context.Context, e task.EndEvent) {
	o := bounded(string(e.Outcome), taskOutcomes)
	m.tasks.ended.WithLabelValues(o).Inc()
	m.tasks.life.WithLabelValues(o).Observe(e.Duration.Seconds())
}

// TaskCancelled counts a cancelled task.
func (m *Metrics) TaskCancelled(context.Context, task.Event) {
	m.tasks.ended.WithLabelValues(outcomeCancelled).Inc()
}

// TaskRejected counts a refusal by reason.
func (m *Metrics) TaskRejected(_ context.Context, e task.RejectEvent) {
	m.tasks.rejections.WithLabelValues(bounded(e.Reason, taskReasons)).Inc()
}

// Attributes of task spans.
const (
	AttrTask        = attribute.Key("mrtr.task")         // the call created a task
	AttrTaskRound   = attribute.Key("mrtr.task.round")   // the input round asked; on the end span, the rounds asked
	AttrTaskInputs  = attribute.Key("mrtr.task.inputs")  // input requests asked
	AttrTaskAnswers = attribute.Key("mrtr.task.answers") // answers taken
	AttrTaskOutcome = attribute.Key("mrtr.task.outcome") // complete, tool_error, error, cancelled
)

var _ task.Observer = (*Tracer)(nil)

// Task spans, with the attributes of a paused call's (Tracer) and never
// the task id (a bearer capability for anonymous callers):
//   - "tools/call {tool}" (server) for the call that created a task,
//     mrtr.task = true;
//   - "tools/call {tool}" (internal) from a task's creation to the end of
//     its work, mrtr.task.outcome and mrtr.task.round (the rounds asked),
//     error.type and rpc.response.status_code when it failed;
//   - "tools/call {tool}" (internal) for each input round, at the time it
//     was asked, with mrtr.task.round and mrtr.task.inputs;
//   - "tasks/update" and "tasks/cancel" (server) for the answers taken
//     (mrtr.task.answers) and for a cancellation;
//   - a refused tasks/* request (server) with error.type = the reason,
//     but unknown_task: anyone can send an id, so those are counted, not
//     traced, as the guard's invalid tokens are.
//
// A span continues the trace context of the request it describes; the
// spans of a task's work continue the creating call's.

// TaskCreated records the span of the call that created a task.
func (t *Tracer) TaskCreated(ctx context.Context, e task.Event) {
	_, span := t.taskStart(ctx, e.Call, t.server, append(make([]attribute.KeyValue, 0, 6), AttrTask.Bool(true)))
	span.End()
}

// TaskInput records the span of an input round.
func (t *Tracer) TaskInput(ctx context.Context, e task.InputEvent) {
	c := e.Call
	c.Start = time.Now()
	_, span := t.taskStart(ctx, c, trace.WithSpanKind(trace.SpanKindInternal), append(make([]attribute.KeyValue, 0, 7),
		AttrTask.Bool(true), AttrTaskRound.Int(e.Round), AttrTaskInputs.Int(len(e.Inputs))))
	span.End()
}

// TaskUpdated records the span of a tasks/update whose answers were taken.
func (t *Tracer) TaskUpdated(ctx context.Context, e task.UpdateEvent) {
	_, span := t.taskStart(ctx, e.Call, t.server, append(make([]attribute.KeyValue, 0, 6), AttrTaskAnswers.Int(len(e.Answers))))
	span.End()
}

// TaskEnded records the span of a task's life.
func (t *Tracer) TaskEnded(ctx context.Context, e task.EndEvent) {
	attrs := append(make([]attribute.KeyValue, 0, 9), AttrTask.Bool(true), AttrTaskRound.Int(e.Rounds), AttrTaskOutcome.String(string(e.Outcome)))
	if e.Outcome == mrtr.OutcomeError {
		attrs = append(attrs, semconv.ErrorTypeOther, semconv.RPCResponseStatusCodeKey.String(strconv.FormatInt(e.ErrorCode, 10)))
	}
	_, span := t.taskStart(ctx, e.Call, trace.WithSpanKind(trace.SpanKindInternal), attrs)
	if e.Outcome == mrtr.OutcomeError {
		span.SetStatus(codes.Error, "task failed")
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// TaskCancelled records the span of a tasks/cancel that cancelled a task.
func (t *Tracer) TaskCancelled(ctx context.Context, e task.Event) {
	_, span := t.taskStart(ctx, e.Call, t.server, append(make([]attribute.KeyValue, 0, 6), AttrTaskOutcome.String(outcomeCancelled)))
	span.End()
}

// TaskRejected records the span of a refused tasks/* request (not for
// unknown_task).
func (t *Tracer) TaskRejected(ctx context.Context, e task.RejectEvent) {
	code := mrtr.CodeInvalidParams
	switch e.Reason {
	case task.ReasonUnknownTask:
		return // anyone can send one: counted, not traced
	case task.ReasonMissingExtension:
		code = mcpwire.CodeMissingCapability
	case task.ReasonAnswersIgnored:
		code = 0 // the request itself was answered
	}
	attrs := append(make([]attribute.KeyValue, 0, 7), semconv.ErrorTypeKey.String(bounded(string(e.Reason), taskReasonStrings)))
	if code != 0 {
		attrs = append(attrs, semconv.RPCResponseStatusCodeKey.String(strconv.Itoa(code)))
	}
	_, span := t.taskStart(ctx, e.Call, t.server, attrs)
	if code != 0 {
		span.SetStatus(codes.Error, string(e.Reason))
	}
	span.End()
}

var taskReasonStrings = []string{string(task.ReasonUnknownTask), string(task.ReasonMissingExtension), string(task.ReasonAnswersIgnored)}

// taskStart starts the span of a task event with the MCP attributes (as
// Tracer.start does for a paused call's) followed by attrs, which must
// have room for four more.
func (t *Tracer) taskStart(ctx context.Context, c task.Call, kind trace.SpanStartOption, attrs []attribute.KeyValue) (context.Context, trace.Span) {
	return t.startKind(ctx, mrtr.Call{Method: c.Method, ProtocolVersion: c.ProtocolVersion, Target: c.Target, Meta: c.Meta, Start: c.Start}, kind, attrs)
}

// TaskObservers tells every task.Observer in it of every event, in order.
type TaskObservers []task.Observer

func (os TaskObservers) each(f func(task.Observer)) {
	for _, o := range os {
		f(o)
	}
}

// TaskCreated passes e on.
func (os TaskObservers) TaskCreated(ctx context.Context, e task.Event) {
	os.each(func(o task.Observer) { o.TaskCreated(ctx, e) })
}

// TaskInput passes e on.
func (os TaskObservers) TaskInput(ctx context.Context, e task.InputEvent) {
	os.each(func(o task.Observer) { o.TaskInput(ctx, e) })
}

// TaskUpdated passes e on.
func (os TaskObservers) TaskUpdated(ctx context.Context, e task.UpdateEvent) {
	os.each(func(o task.Observer) { o.TaskUpdated(ctx, e) })
}

// TaskEnded passes e on.
func (os TaskObservers) TaskEnded(ctx context.Context, e task.EndEvent) {
	os.each(func(o task.Observer) { o.TaskEnded(ctx, e) })
}

// TaskCancelled passes e on.
func (os TaskObservers) TaskCancelled(ctx context.Context, e task.Event) {
	os.each(func(o task.Observer) { o.TaskCancelled(ctx, e) })
}

// TaskRejected passes e on.
func (os TaskObservers) TaskRejected(ctx context.Context, e task.RejectEvent) {
	os.each(func(o task.Observer) { o.TaskRejected(ctx, e) })
}
