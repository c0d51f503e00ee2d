package gosdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
)

// countingStore counts the lookups that reach a store.
type countingStore struct {
	task.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, k task.Key, now time.Time) (*task.Record, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, k, now)
}

// taskNode is one replica: a go-sdk server with tasks over store, whose
// principal is the subject the bearer token names (none: anonymous).
type taskNode struct {
	url       string
	cancelled chan string // ids of tasks whose work saw its context end
}

func startTaskNode(t *testing.T, store task.Store, topts *task.Options) *taskNode {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "tasks", Version: "1"}, nil)
	var o task.Options
	if topts != nil {
		o = *topts
	}
	o.Watch = max(o.Watch, 50*time.Millisecond)
	o.AnswerPoll = 20 * time.Millisecond
	a := gosdk.Install(s, mrtr.New(reqstate.New(ring, nil), nil), &gosdk.Options{
		Tasks: task.NewManager(store, &o),
		Principal: func(_ context.Context, req mcp.Request) (reqstate.Principal, error) {
			if u, ok := strings.CutPrefix(req.GetExtra().Header.Get("Authorization"), "Bearer "); ok && u != "" {
				return reqstate.Principal{Issuer: "test", Subject: u}, nil
			}
			return reqstate.Principal{}, nil
		},
	})
	n := &taskNode{cancelled: make(chan string, 16)}
	type none struct{}
	gosdk.AddTool(a, &mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, &gosdk.TaskOptions{TTL: time.Minute, PollInterval: 100 * time.Millisecond, Message: "asking"},
				func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
					ans, err := tk.Ask(ctx, mcp.InputRequestMap{
						"a": &mcp.ElicitParams{Message: "a?", RequestedSchema: map[string]any{"type": "object"}},
						"b": &mcp.ElicitParams{Message: "b?", RequestedSchema: map[string]any{"type": "object"}},
					})
					if err != nil {
						return nil, err
					}
					x, _ := ans.Elicited("a")
					y, _ := ans.Elicited("b")
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("a=%v b=%v", x.Content["v"], y.Content["v"])}}}, nil
				})
		})
	gosdk.AddTool(a, &mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
				<-ctx.Done()
				n.cancelled <- tk.ID()
				return nil, ctx.Err()
			})
		})
	gosdk.AddTool(a, &mcp.Tool{Name: "sample", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
				_, err := tk.Ask(ctx, mcp.InputRequestMap{"s": &mcp.CreateMessageParams{MaxTokens: 10,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}})
				return nil, err
			})
		})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close)
	n.url = srv.URL
	return n
}

// client returns a raw 2026-07-28 client of url for user (a bearer token
// the node takes as the subject; empty: anonymous) that declares the
// extension, or not.
func client(url, user string, declare bool) *adaptertest.Client {
	caps := map[string]any{"elicitation": map[string]any{}}
	if declare {
		caps["extensions"] = map[string]any{task.Extension: map[string]any{}}
	}
	return &adaptertest.Client{URL: url, Token: user, Caps: caps}
}

type detailed struct {
	TaskID        string                     `json:"taskId"`
	ResultType    string                     `json:"resultType"`
	Status        task.Status                `json:"status"`
	StatusMessage string                     `json:"statusMessage"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        *mcp.CallToolResult        `json:"result"`
	Error         json.RawMessage            `json:"error"`
}

func mustResult(t *testing.T, r adaptertest.Response) detailed {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %v", r)
	}
	raw, _ := json.Marshal(r.Result)
	var d detailed
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func create(t *testing.T, url, user, tool string) string {
	t.Helper()
	d := mustResult(t, client(url, user, true).Call(t, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}}))
	if d.ResultType != "task" || len(d.TaskID) < 22 {
		t.Fatalf("tools/call %s: %+v, want a CreateTaskResult", tool, d)
	}
	return d.TaskID
}

func get(t *testing.T, url, user, id string) detailed {
	t.Helper()
	return mustResult(t, client(url, user, true).Call(t, task.MethodGet, map[string]any{"taskId": id}))
}

// isAck reports whether r is the empty acknowledgement of tasks/update and
// tasks/cancel.
func isAck(r adaptertest.Response) bool {
	return r.Error == nil && len(r.Result) == 1 && r.Result["resultType"] == "complete"
}

// waitStatus polls until the task has status st.
func waitStatus(t *testing.T, url, user, id string, st task.Status) detailed {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := get(t, url, user, id)
		if d.Status == st {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, d.Status, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTasksGateBeforeLookup: a request that did not declare the extension
// gets -32021 for every tasks/* method, its own task's id included, and
// nothing is looked up.
func TestTasksGateBeforeLookup(t *testing.T) {
	store := &countingStore{Store: task.NewMemory(nil)}
	n := startTaskNode(t, store, nil)
	id := create(t, n.url, "alice", "wait")
	before := store.gets.Load()
	for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
		r := client(n.url, "alice", false).Call(t, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != -32021 || !bytes.Contains(r.Error.Data, []byte(task.Extension)) {
			t.Errorf("%s without the extension: %v, want -32021 naming it", m, r)
		}
	}
	if got := store.gets.Load() - before; got != 0 {
		t.Errorf("%d lookups reached the store for undeclared requests", got)
	}
	// A tool that can only be a task is not run for such a caller.
	if r := client(n.url, "alice", false).Call(t, "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{}}); r.Error == nil || r.Error.Code != -32021 {
		t.Errorf("RunTask for an undeclared caller: %v, want -32021", r)
	}
	client(n.url, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id})
}

// TestTasksOtherCallerIsUnknown: another principal (or the anonymous
// caller) gets exactly what an unknown id gets, on every method, and
// changes nothing.
func TestTasksOtherCallerIsUnknown(t *testing.T) {
	n := startTaskNode(t, task.NewMemory(nil), nil)
	id := create(t, n.url, "alice", "ask")
	waitStatus(t, n.url, "alice", id, task.InputRequired)
	unknown := client(n.url, "alice", true).Call(t, task.MethodGet, map[string]any{"taskId": "no-such-task"})
	if unknown.Error == nil || unknown.Error.Code != -32602 {
		t.Fatalf("unknown id: %v", unknown)
	}
	for _, user := range []string{"bob", ""} {
		for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
			params := map[string]any{"taskId": id, "inputResponses": map[string]any{"a": map[string]any{"action": "accept", "content": map[string]any{"v": "bob"}}}}
			if r := client(n.url, user, true).Call(t, m, params); !reflect.DeepEqual(r, unknown) {
				t.Errorf("%s by %q: %v, want exactly %v", m, user, r, unknown)
			}
		}
	}
	d := get(t, n.url, "alice", id)
	if d.Status != task.InputRequired || len(d.InputRequests) != 2 {
		t.Errorf("alice's task after the others: %s with %d requests", d.Status, len(d.InputRequests))
	}
	client(n.url, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id})
}

// TestTasksAnswers: a partial answer keeps the task input_required with
// the rest outstanding; answers to keys never asked, of the wrong shape,
// or already answered are ignored; the task then completes with the
// answers it took.
func TestTasksAnswers(t *testing.T) {
	n := startTaskNode(t, task.NewMemory(nil), nil)
	id := create(t, n.url, "alice", "ask")
	d := waitStatus(t, n.url, "alice", id, task.InputRequired)
	if d.StatusMessage != "asking" || d.ResultType != "complete" {
		t.Errorf("tasks/get: %+v", d)
	}
	update := func(responses map[string]any) {
		t.Helper()
		if r := client(n.url, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": responses}); !isAck(r) {
			t.Fatalf("tasks/update: %v", r)
		}
	}
	update(map[string]any{
		"a":     map[string]any{"action": "accept", "content": map[string]any{"v": 1}},
		"b":     map[string]any{"role": "assistant"}, // not an elicitation result
		"never": map[string]any{"action": "accept"},
	})
	d = get(t, n.url, "alice", id)
	if d.Status != task.InputRequired || len(d.InputRequests) != 1 || d.InputRequests["b"] == nil {
		t.Fatalf("after a partial answer: %s %v", d.Status, d.InputRequests)
	}
	update(map[string]any{
		"a": map[string]any{"action": "accept", "content": map[string]any{"v": "again"}}, // answered already
		"b": map[string]any{"action": "accept", "content": map[string]any{"v": 2}},
	})
	d = waitStatus(t, n.url, "alice", id, task.Completed)
	if got := d.Result.Content[0].(*mcp.TextContent).Text; got != "a=1 b=2" {
		t.Errorf("result %q, want a=1 b=2", got)
	}
	// Malformed inputResponses is a protocol error.
	if r := client(n.url, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": 7}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("inputResponses 7: %v", r)
	}
}

// TestTasksAskNeedsCapability: a task never asks what the client that
// created it did not declare (here sampling): Ask fails with -32021, as a
// paused call's does, and the task fails with that error.
func TestTasksAskNeedsCapability(t *testing.T) {
	n := startTaskNode(t, task.NewMemory(nil), nil)
	id := create(t, n.url, "alice", "sample")
	d := waitStatus(t, n.url, "alice", id, task.Failed)
	var e struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(d.Error, &e) != nil || e.Code != -32021 || !bytes.Contains(e.Data, []byte("sampling")) {
		t.Errorf("error %s, want -32021 naming sampling", d.Error)
	}
}

// TestTasksNameHeader: a tasks/* request whose Mcp-Name is not its taskId
// is refused with HTTP 400 and -32020.
func TestTasksNameHeader(t *testing.T) {
	n := startTaskNode(t, task.NewMemory(nil), nil)
	body := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"abc","_meta":{}}}`
	for _, name := range []string{"", "abd"} {
		req, _ := http.NewRequest(http.MethodPost, n.url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tasks/get")
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			ID    int `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		resp.Body.Close()
		if resp.StatusCode != 400 || msg.Error.Code != -32020 || msg.ID != 9 {
			t.Errorf("Mcp-Name %q: HTTP %d, %+v", name, resp.StatusCode, msg)
		}
	}
}

// TestTasksAcrossReplicas: on one Redis, a task created on one replica is
// read, answered and cancelled on another; the replica running it picks
// up the answers and the cancellation, and other callers see nothing.
func TestTasksAcrossReplicas(t *testing.T) {
	url := testredis.Start(t)
	node := func() *taskNode {
		rs, err := redisstore.NewFromURL(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return startTaskNode(t, redistask.New(rs, nil), nil)
	}
	a, b := node(), node()

	id := create(t, a.url, "alice", "ask")
	d := waitStatus(t, b.url, "alice", id, task.InputRequired)
	if len(d.InputRequests) != 2 {
		t.Fatalf("on the other replica: %v", d.InputRequests)
	}
	unknown := client(b.url, "alice", true).Call(t, task.MethodGet, map[string]any{"taskId": "no-such-task"})
	if r := client(b.url, "bob", true).Call(t, task.MethodGet, map[string]any{"taskId": id}); !reflect.DeepEqual(r, unknown) {
		t.Errorf("bob on the other replica: %v, want %v", r, unknown)
	}
	for _, k := range []string{"a", "b"} {
		r := client(b.url, "alice", true).Call(t, task.MethodUpdate, map[string]any{"taskId": id,
			"inputResponses": map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"v": k}}}})
		if !isAck(r) {
			t.Fatalf("update on the other replica: %v", r)
		}
	}
	d = waitStatus(t, b.url, "alice", id, task.Completed)
	if got := d.Result.Content[0].(*mcp.TextContent).Text; got != "a=a b=b" {
		t.Errorf("result %q", got)
	}

	// Cancelled on b, the work running on a sees its context end.
	id = create(t, a.url, "alice", "wait")
	if r := client(b.url, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id}); !isAck(r) {
		t.Fatalf("cancel: %v", r)
	}
	select {
	case got := <-a.cancelled:
		if got != id {
			t.Errorf("cancelled %s, want %s", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancellation did not reach the work on the other replica")
	}
	if d := get(t, a.url, "alice", id); d.Status != task.Cancelled {
		t.Errorf("status %s after cancel", d.Status)
	}
}

// TestTasksLapsedLease: when the replica running a task stops renewing its
// lease, another replica's tasks/get finds the task failed.
func TestTasksLapsedLease(t *testing.T) {
	url := testredis.Start(t)
	rs, err := redisstore.NewFromURL(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	// The running node renews only every minute: its 200ms lease lapses.
	a := startTaskNode(t, redistask.New(rs, nil), &task.Options{Lease: 200 * time.Millisecond, Watch: time.Minute})
	b := startTaskNode(t, redistask.New(rs, nil), nil)
	id := create(t, a.url, "alice", "wait")
	time.Sleep(300 * time.Millisecond)
	d := get(t, b.url, "alice", id)
	if d.Status != task.Failed || !bytes.Contains(d.Error, []byte("-32603")) {
		t.Fatalf("after the lease: %s %s, want failed with -32603", d.Status, d.Error)
	}
}
