package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
)

// The tasks suite: what every adapter's tasks (the io.modelcontextprotocol/tasks
// extension) must do on the wire, run by gosdk's and mcpgo's tests against
// replicas they start (TaskServer).

// TaskNode is one replica of a server under the tasks suite.
type TaskNode struct {
	URL string
	// Cancelled receives the id of a "wait" task when its work saw its
	// context end. Buffer it.
	Cancelled chan string
}

// TaskServer starts one replica serving tasks over store, whose manager
// takes opts, behind an HTTP endpoint that lives as long as t. The caller
// of a request is the subject of its bearer token (none: anonymous). Its
// tools, each running as a task with the adapter's RunTask:
//
//   - "ask": TTL one minute, poll interval 100ms, status message "asking";
//     asks two form elicitations at once, keys "a" and "b", and completes
//     with the text "a=<a's content.v> b=<b's content.v>".
//   - "wait": waits until its context ends, sends its task id to
//     Cancelled and returns the context's error.
//   - "sample": asks one sampling request (key "s") and returns Ask's error.
type TaskServer func(t *testing.T, store task.Store, opts *task.Options) *TaskNode

// RunTasks runs the tasks suite against replicas start starts; the cases
// on Redis skip (or fail with MRTR_REQUIRE_REDIS) without a redis-server.
func RunTasks(t *testing.T, start TaskServer) {
	s := taskSuite{start: start}
	t.Run("GateBeforeLookup", s.gateBeforeLookup)
	t.Run("OtherCallerIsUnknown", s.otherCallerIsUnknown)
	t.Run("Answers", s.answers)
	t.Run("AskNeedsCapability", s.askNeedsCapability)
	t.Run("NameHeader", s.nameHeader)
	t.Run("AcrossReplicas", s.acrossReplicas)
	t.Run("LapsedLease", s.lapsedLease)
	t.Run("Events", s.events)
}

type taskSuite struct{ start TaskServer }

// node starts a replica with the suite's quick timings.
func (s taskSuite) node(t *testing.T, store task.Store, opts *task.Options) *TaskNode {
	t.Helper()
	var o task.Options
	if opts != nil {
		o = *opts
	}
	o.Watch = max(o.Watch, 50*time.Millisecond)
	o.AnswerPoll = 20 * time.Millisecond
	return s.start(t, store, &o)
}

// CountingStore counts the lookups that reach a store.
type CountingStore struct {
	task.Store
	Gets atomic.Int64
}

func (s *CountingStore) Get(ctx context.Context, k task.Key, now time.Time) (*task.Record, error) {
	s.Gets.Add(1)
	return s.Store.Get(ctx, k, now)
}

// TaskClient returns a raw 2026-07-28 client of url for user (a bearer
// token the node takes as the subject; empty: anonymous) that declares
// elicitation and, with declare, the extension.
func TaskClient(url, user string, declare bool) *Client {
	caps := map[string]any{"elicitation": map[string]any{}}
	if declare {
		caps["extensions"] = map[string]any{task.Extension: map[string]any{}}
	}
	return &Client{URL: url, Token: user, Caps: caps}
}

// Detailed is a task as tasks/get (or a CreateTaskResult) shows it.
type Detailed struct {
	TaskID        string                     `json:"taskId"`
	ResultType    string                     `json:"resultType"`
	Status        task.Status                `json:"status"`
	StatusMessage string                     `json:"statusMessage"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        map[string]any             `json:"result"`
	Error         json.RawMessage            `json:"error"`
}

// Text joins the text contents of the task's result.
func (d Detailed) Text() string { return Response{Result: d.Result}.Text() }

// MustTask decodes a response that must be a task.
func MustTask(t testing.TB, r Response) Detailed {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %v", r)
	}
	raw, _ := json.Marshal(r.Result)
	var d Detailed
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// CreateTask calls tool for user, declaring the extension, and returns the
// task id of its CreateTaskResult.
func CreateTask(t testing.TB, url, user, tool string) string {
	t.Helper()
	d := MustTask(t, TaskClient(url, user, true).Call(t, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}}))
	if d.ResultType != "task" || len(d.TaskID) < 22 || d.Result != nil || d.InputRequests != nil {
		t.Fatalf("tools/call %s: %+v, want a CreateTaskResult", tool, d)
	}
	return d.TaskID
}

// GetTask is user's tasks/get of id.
func GetTask(t testing.TB, url, user, id string) Detailed {
	t.Helper()
	return MustTask(t, TaskClient(url, user, true).Call(t, task.MethodGet, map[string]any{"taskId": id}))
}

// IsAck reports whether r is the empty acknowledgement of tasks/update and
// tasks/cancel.
func IsAck(r Response) bool {
	return r.Error == nil && len(r.Result) == 1 && r.Result["resultType"] == "complete"
}

// WaitTask polls until the task has status st.
func WaitTask(t testing.TB, url, user, id string, st task.Status) Detailed {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := GetTask(t, url, user, id)
		if d.Status == st {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, d.Status, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gateBeforeLookup: a request that did not declare the extension gets
// -32021 for every tasks/* method, its own task's id included, and nothing
// is looked up; a tool that can only be a task is not run for it.
func (s taskSuite) gateBeforeLookup(t *testing.T) {
	store := &CountingStore{Store: task.NewMemory(nil)}
	n := s.node(t, store, nil)
	id := CreateTask(t, n.URL, "alice", "wait")
	before := store.Gets.Load()
	for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
		r := TaskClient(n.URL, "alice", false).Call(t, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != -32021 || !bytes.Contains(r.Error.Data, []byte(task.Extension)) {
			t.Errorf("%s without the extension: %v, want -32021 naming it", m, r)
		}
	}
	if got := store.Gets.Load() - before; got != 0 {
		t.Errorf("%d lookups reached the store for undeclared requests", got)
	}
	if r := TaskClient(n.URL, "alice", false).Call(t, "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{}}); r.Error == nil || r.Error.Code != -32021 || r.Result != nil {
		t.Errorf("RunTask for an undeclared caller: %v, want -32021", r)
	}
	TaskClient(n.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id})
}

// otherCallerIsUnknown: another principal (or the anonymous caller) gets
// exactly what an unknown id gets, HTTP status included, on every method,
// and changes nothing.
func (s taskSuite) otherCallerIsUnknown(t *testing.T) {
	n := s.node(t, task.NewMemory(nil), nil)
	id := CreateTask(t, n.URL, "alice", "ask")
	WaitTask(t, n.URL, "alice", id, task.InputRequired)
	unknown := TaskClient(n.URL, "alice", true).Call(t, task.MethodGet, map[string]any{"taskId": "no-such-task"})
	if unknown.Error == nil || unknown.Error.Code != -32602 || unknown.Error.Message != task.UnknownMessage {
		t.Fatalf("unknown id: %v", unknown)
	}
	for _, user := range []string{"bob", ""} {
		for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
			params := map[string]any{"taskId": id, "inputResponses": map[string]any{"a": map[string]any{"action": "accept", "content": map[string]any{"v": "bob"}}}}
			if r := TaskClient(n.URL, user, true).Call(t, m, params); !reflect.DeepEqual(r, unknown) {
				t.Errorf("%s by %q: %v, want exactly %v", m, user, r, unknown)
			}
		}
	}
	d := GetTask(t, n.URL, "alice", id)
	if d.Status != task.InputRequired || len(d.InputRequests) != 2 {
		t.Errorf("alice's task after the others: %s with %d requests", d.Status, len(d.InputRequests))
	}
	TaskClient(n.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id})
}

// answers: a partial answer keeps the task input_required with the rest
// outstanding; answers to keys never asked, of the wrong shape, or already
// answered are ignored; the task then completes with the answers it took.
func (s taskSuite) answers(t *testing.T) {
	n := s.node(t, task.NewMemory(nil), nil)
	id := CreateTask(t, n.URL, "alice", "ask")
	d := WaitTask(t, n.URL, "alice", id, task.InputRequired)
	if d.StatusMessage != "asking" || d.ResultType != "complete" {
		t.Errorf("tasks/get: %+v", d)
	}
	update := func(responses map[string]any) {
		t.Helper()
		if r := TaskClient(n.URL, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": responses}); !IsAck(r) {
			t.Fatalf("tasks/update: %v", r)
		}
	}
	update(map[string]any{
		"a":     map[string]any{"action": "accept", "content": map[string]any{"v": 1}},
		"b":     map[string]any{"role": "assistant"}, // not an elicitation result
		"never": map[string]any{"action": "accept"},
	})
	d = GetTask(t, n.URL, "alice", id)
	if d.Status != task.InputRequired || len(d.InputRequests) != 1 || d.InputRequests["b"] == nil {
		t.Fatalf("after a partial answer: %s %v", d.Status, d.InputRequests)
	}
	update(map[string]any{
		"a": map[string]any{"action": "accept", "content": map[string]any{"v": "again"}}, // answered already
		"b": map[string]any{"action": "accept", "content": map[string]any{"v": 2}},
	})
	d = WaitTask(t, n.URL, "alice", id, task.Completed)
	if got := d.Text(); got != "a=1 b=2" {
		t.Errorf("result %q, want a=1 b=2", got)
	}
	// Malformed inputResponses is a protocol error.
	if r := TaskClient(n.URL, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": 7}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("inputResponses 7: %v", r)
	}
}

// askNeedsCapability: a task never asks what the client that created it
// did not declare (here sampling): Ask fails with -32021, as a paused
// call's does, and the task fails with that error.
func (s taskSuite) askNeedsCapability(t *testing.T) {
	n := s.node(t, task.NewMemory(nil), nil)
	id := CreateTask(t, n.URL, "alice", "sample")
	d := WaitTask(t, n.URL, "alice", id, task.Failed)
	var e struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(d.Error, &e) != nil || e.Code != -32021 || !bytes.Contains(e.Data, []byte("sampling")) {
		t.Errorf("error %s, want -32021 naming sampling", d.Error)
	}
}

// nameHeader: a tasks/* request whose Mcp-Name is not its taskId is
// refused with HTTP 400 and -32020.
func (s taskSuite) nameHeader(t *testing.T) {
	n := s.node(t, task.NewMemory(nil), nil)
	body := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"abc","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, name := range []string{"", "abd"} {
		h := http.Header{"Mcp-Method": {"tasks/get"}}
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		if r := PostRaw(t, n.URL, h, body); r.Status != 400 || r.Error == nil || r.Error.Code != -32020 {
			t.Errorf("Mcp-Name %q: %v", name, r)
		}
	}
}

// PostRaw posts body, a 2026-07-28 JSON-RPC request with id 9, with the
// headers h beside the transport's own (Content-Type, Accept,
// MCP-Protocol-Version), and returns its response.
func PostRaw(t testing.TB, url string, h http.Header, body string) Response {
	t.Helper()
	var msg map[string]any
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	h = h.Clone()
	h.Set("MCP-Protocol-Version", "2026-07-28")
	r, _ := (&Client{URL: url}).post(t, h, msg, 9)
	return r
}

// redisNode starts a replica over the Redis at url.
func (s taskSuite) redisNode(t *testing.T, url string, opts *task.Options) *TaskNode {
	t.Helper()
	rs, err := redisstore.NewFromURL(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return s.node(t, redistask.New(rs, nil), opts)
}

// acrossReplicas: on one Redis, a task created on one replica is read,
// answered and cancelled on another; the replica running it picks up the
// answers and the cancellation, and other callers see nothing.
func (s taskSuite) acrossReplicas(t *testing.T) {
	url := testredis.Start(t)
	a, b := s.redisNode(t, url, nil), s.redisNode(t, url, nil)

	id := CreateTask(t, a.URL, "alice", "ask")
	d := WaitTask(t, b.URL, "alice", id, task.InputRequired)
	if len(d.InputRequests) != 2 {
		t.Fatalf("on the other replica: %v", d.InputRequests)
	}
	unknown := TaskClient(b.URL, "alice", true).Call(t, task.MethodGet, map[string]any{"taskId": "no-such-task"})
	if r := TaskClient(b.URL, "bob", true).Call(t, task.MethodGet, map[string]any{"taskId": id}); !reflect.DeepEqual(r, unknown) {
		t.Errorf("bob on the other replica: %v, want %v", r, unknown)
	}
	for _, k := range []string{"a", "b"} {
		r := TaskClient(b.URL, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id,
			"inputResponses": map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"v": k}}}})
		if !IsAck(r) {
			t.Fatalf("update on the other replica: %v", r)
		}
	}
	d = WaitTask(t, b.URL, "alice", id, task.Completed)
	if got := d.Text(); got != "a=a b=b" {
		t.Errorf("result %q", got)
	}

	// Cancelled on b, the work running on a sees its context end.
	id = CreateTask(t, a.URL, "alice", "wait")
	if r := TaskClient(b.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id}); !IsAck(r) {
		t.Fatalf("cancel: %v", r)
	}
	a.WaitCancelled(t, id)
	if d := GetTask(t, a.URL, "alice", id); d.Status != task.Cancelled {
		t.Errorf("status %s after cancel", d.Status)
	}
}

// WaitCancelled waits until the work of the "wait" task id saw its
// context end on n.
func (n *TaskNode) WaitCancelled(t testing.TB, id string) {
	t.Helper()
	select {
	case got := <-n.Cancelled:
		if got != id {
			t.Errorf("cancelled %s, want %s", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the cancellation of %s did not reach its work", id)
	}
}

// lapsedLease: when the replica running a task stops renewing its lease,
// another replica's tasks/get finds the task failed.
func (s taskSuite) lapsedLease(t *testing.T) {
	url := testredis.Start(t)
	// The running node renews only every minute: its 200ms lease lapses.
	a := s.redisNode(t, url, &task.Options{Lease: 200 * time.Millisecond, Watch: time.Minute})
	b := s.redisNode(t, url, nil)
	id := CreateTask(t, a.URL, "alice", "wait")
	time.Sleep(300 * time.Millisecond)
	d := GetTask(t, b.URL, "alice", id)
	if d.Status != task.Failed || !bytes.Contains(d.Error, []byte(fmt.Sprint(-32603))) {
		t.Fatalf("after the lease: %s %s, want failed with -32603", d.Status, d.Error)
	}
}
