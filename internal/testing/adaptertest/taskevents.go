package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// emptyArgs is the hash of the arguments {}.
var emptyArgs, _ = reqstate.HashArguments(json.RawMessage(`{}`))

// TaskScenario is what RunTaskScenario did, for the observer's checks.
type TaskScenario struct {
	// Asked is the id of the task that asked one input round and
	// completed; Cancelled the id of the task cancelled.
	Asked, Cancelled string
	// Secrets must appear in no record: the task ids, an argument value,
	// an answer's content, the result and a status message.
	Secrets []string
	// Alice owns both tasks; Bob asked for Alice's task.
	Alice, Bob reqstate.Principal
}

// The values RunTaskScenario passes that no record may show.
const (
	ScenarioArg     = "argument-value-9f2c"
	ScenarioAnswer  = "answer-content-7d1e"
	ScenarioResult  = "result-text-5b3a"
	ScenarioMessage = "status-message-1c8f"
)

// RunTaskScenario runs, on a task.Manager over a memory store reporting to
// obs: Alice's tools/call "deploy" (arguments {"env": ScenarioArg}, client
// "c" "1", request id 7) becomes a task that asks one elicitation ("confirm")
// and completes; Bob's tasks/get of it (unknown_task); a tasks/get that did
// not declare the extension (missing_extension, reported as an adapter
// does); Alice's tasks/update answering "confirm" and "never" (one taken, one
// ignored); Alice's second task, cancelled by her tasks/cancel. It returns
// once every event is reported: obs saw, in this order, TaskCreated,
// TaskInput, TaskRejected (unknown_task), TaskRejected (missing_extension),
// TaskUpdated, TaskRejected (answers_ignored), TaskEnded (complete),
// TaskCreated, TaskCancelled.
func RunTaskScenario(t *testing.T, obs task.Observer) TaskScenario {
	t.Helper()
	rec := &endWaiter{Observer: obs, asked: make(chan struct{}, 1), ended: make(chan struct{}, 1)}
	// Only tasks/update wakes the work (AnswerPoll is long), after it
	// reported its answers: the order of the events is fixed.
	m := task.NewManager(task.NewMemory(nil), &task.Options{Observer: rec, AnswerPoll: time.Hour, Watch: 20 * time.Millisecond})
	s := TaskScenario{
		Alice: reqstate.Principal{Issuer: "https://idp.example", Subject: "alice"},
		Bob:   reqstate.Principal{Issuer: "https://idp.example", Subject: "bob"},
	}
	meta := map[string]any{"io.modelcontextprotocol/clientInfo": map[string]any{"name": "c", "version": "1"}}
	call := func(method string) context.Context {
		c := task.Call{Method: method, ProtocolVersion: "2026-07-28", Meta: meta, RequestID: "7"}
		var args json.RawMessage
		if method == "tools/call" {
			c.Target, args = "deploy", json.RawMessage(`{"env":"`+ScenarioArg+`"}`)
		}
		return task.WithCall(t.Context(), c, args)
	}
	idOf := func(created json.RawMessage, err error) string {
		t.Helper()
		var r struct {
			TaskID string `json:"taskId"`
		}
		if err != nil || json.Unmarshal(created, &r) != nil || r.TaskID == "" {
			t.Fatalf("Start: %s, %v", created, err)
		}
		return r.TaskID
	}
	s.Asked = idOf(m.Start(call("tools/call"), s.Alice, task.Spec{Message: ScenarioMessage}, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		if _, err := r.Ask(ctx, map[string]json.RawMessage{
			"confirm": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{}}}}`),
		}); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"` + ScenarioResult + `"}]}`), nil
	}))
	wait(t, rec.asked)
	if _, err := m.Get(call(task.MethodGet), s.Bob, s.Asked); !errors.Is(err, task.ErrUnknown) {
		t.Fatalf("Bob's tasks/get: %v", err)
	}
	m.Rejected(call(task.MethodGet), s.Alice, task.MethodGet, task.ReasonMissingExtension)
	if err := m.Update(call(task.MethodUpdate), s.Alice, s.Asked, map[string]json.RawMessage{
		"confirm": json.RawMessage(`{"action":"accept","content":{"x":"` + ScenarioAnswer + `"}}`),
		"never":   json.RawMessage(`{"action":"decline"}`),
	}); err != nil {
		t.Fatal(err)
	}
	wait(t, rec.ended)
	s.Cancelled = idOf(m.Start(call("tools/call"), s.Alice, task.Spec{}, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	if err := m.Cancel(call(task.MethodCancel), s.Alice, s.Cancelled); err != nil {
		t.Fatal(err)
	}
	s.Secrets = []string{s.Asked, s.Cancelled, ScenarioArg, ScenarioAnswer, ScenarioResult, ScenarioMessage}
	return s
}

func wait(t *testing.T, c chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not get there in 10s")
	}
}

// endWaiter passes events on and signals the first TaskInput and TaskEnded.
type endWaiter struct {
	task.Observer
	asked, ended chan struct{}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (w *endWaiter) TaskInput(ctx context.Context, e task.InputEvent) {
	w.Observer.TaskInput(ctx, e)
	signal(w.asked)
}

func (w *endWaiter) TaskEnded(ctx context.Context, e task.EndEvent) {
	w.Observer.TaskEnded(ctx, e)
	signal(w.ended)
}

// TaskRecorder is a task.Observer that keeps every event. It is safe for
// concurrent use.
type TaskRecorder struct {
	mu     sync.Mutex
	Events []any // task.Event (created: Kind "created"; cancelled: see Kinds), task.InputEvent, ...
	Kinds  []string
}

func (r *TaskRecorder) add(kind string, e any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Kinds, r.Events = append(r.Kinds, kind), append(r.Events, e)
}

// wait waits until an event of kind was recorded.
func (r *TaskRecorder) wait(t *testing.T, kind string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if kinds, _ := r.Snapshot(); slices.Contains(kinds, kind) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event", kind)
		}
	}
}

// Snapshot returns the kinds and events recorded so far.
func (r *TaskRecorder) Snapshot() ([]string, []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.Kinds), slices.Clone(r.Events)
}

func (r *TaskRecorder) TaskCreated(_ context.Context, e task.Event)       { r.add("created", e) }
func (r *TaskRecorder) TaskInput(_ context.Context, e task.InputEvent)    { r.add("input", e) }
func (r *TaskRecorder) TaskUpdated(_ context.Context, e task.UpdateEvent) { r.add("updated", e) }
func (r *TaskRecorder) TaskEnded(_ context.Context, e task.EndEvent)      { r.add("ended", e) }
func (r *TaskRecorder) TaskCancelled(_ context.Context, e task.Event)     { r.add("cancelled", e) }
func (r *TaskRecorder) TaskRejected(_ context.Context, e task.RejectEvent) {
	r.add("rejected:"+string(e.Reason), e)
}

// events: the adapter describes each request to the manager's Observer
// (task.WithCall): the tools/call that created the task (method, tool,
// caller), the tasks/* requests (method, caller), and the -32021 gate's
// refusal, which the manager never sees.
func (s taskSuite) events(t *testing.T) {
	rec := &TaskRecorder{}
	n := s.node(t, task.NewMemory(nil), &task.Options{Observer: rec})
	id := CreateTask(t, n.URL, "alice", "ask")
	WaitTask(t, n.URL, "alice", id, task.InputRequired)
	rec.wait(t, "input") // reported just after the store shows it
	TaskClient(n.URL, "bob", true).Call(t, task.MethodGet, map[string]any{"taskId": id})
	TaskClient(n.URL, "alice", false).Call(t, task.MethodGet, map[string]any{"taskId": id})
	accept := func(v int) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{"v": v}}
	}
	TaskClient(n.URL, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": map[string]any{"a": accept(1), "b": accept(2)}})
	WaitTask(t, n.URL, "alice", id, task.Completed)
	rec.wait(t, "ended")
	kinds, events := rec.Snapshot()
	want := []string{"created", "input", "rejected:unknown_task", "rejected:missing_extension", "updated", "ended"}
	if len(kinds) == len(want) && kinds[4] == "ended" {
		// The work may take the answers at its AnswerPoll before the
		// update reports them.
		kinds[4], kinds[5], events[4], events[5] = kinds[5], kinds[4], events[5], events[4]
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	if c := events[0].(task.Event); c.Method != "tools/call" || c.Target != "ask" || c.Principal.Subject != "alice" || c.TaskID != id {
		t.Errorf("created: %+v", c)
	} else if h, err := c.ArgsHash(); err != nil || h != emptyArgs {
		t.Errorf("created: the arguments hash %x, %v; want that of {}", h, err)
	}
	if r := events[2].(task.RejectEvent); r.Method != task.MethodGet || r.Principal.Subject != "bob" || r.TaskID != id {
		t.Errorf("unknown_task: %+v", r)
	}
	if r := events[3].(task.RejectEvent); r.Method != task.MethodGet || r.Principal.Subject != "alice" {
		t.Errorf("missing_extension: %+v", r)
	}
	if u := events[4].(task.UpdateEvent); u.Method != task.MethodUpdate || u.Principal.Subject != "alice" ||
		!slices.Equal(u.Answers, []mrtr.Answer{{Key: "a", Action: "accept"}, {Key: "b", Action: "accept"}}) {
		t.Errorf("updated: %+v", u)
	}
	if e := events[5].(task.EndEvent); e.Outcome != mrtr.OutcomeComplete || e.Rounds != 1 || e.Target != "ask" {
		t.Errorf("ended: %+v", e)
	}
}
