package demo_test

import (
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/task"
)

// tasksClient is a raw 2026-07-28 client that declares elicitation and,
// with declare, the tasks extension.
func tasksClient(ts *testServer, declare bool) *adaptertest.Client {
	caps := map[string]any{"elicitation": map[string]any{}}
	if declare {
		caps["extensions"] = map[string]any{task.Extension: map[string]any{}}
	}
	return &adaptertest.Client{URL: ts.url, Caps: caps}
}

// pollTask polls tasks/get until the task has status st.
func pollTask(t *testing.T, c *adaptertest.Client, id, st string) adaptertest.Response {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := c.Call(t, task.MethodGet, map[string]any{"taskId": id})
		if r.Error != nil {
			t.Fatalf("tasks/get: %v", r)
		}
		if r.Result["status"] == st {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %v, want status %s", id, r, st)
		}
	}
}

// TestTaskFixtures drives the task fixtures the harness's tasks-*
// scenarios name, with and without the extension declared.
func TestTaskFixtures(t *testing.T) {
	ts := start(t, nil, nil)
	with, without := tasksClient(ts, true), tasksClient(ts, false)
	call := func(c *adaptertest.Client, tool string, args map[string]any) adaptertest.Response {
		t.Helper()
		return c.Call(t, "tools/call", map[string]any{"name": tool, "arguments": args})
	}

	if r := call(with, "greet", map[string]any{"name": "World"}); r.Text() != "Hello, World!" || r.Result["taskId"] != nil {
		t.Errorf("greet: %v", r)
	}
	// slow_compute runs on the call for a caller without the extension.
	if r := call(without, "slow_compute", map[string]any{"seconds": 0, "label": "x"}); r.Result["resultType"] != "complete" || r.Text() == "" {
		t.Errorf("slow_compute without the extension: %v", r)
	}
	// failing_job and test_tool_with_task refuse such a caller.
	for _, tool := range []string{"failing_job", "test_tool_with_task"} {
		if r := call(without, tool, map[string]any{}); r.Error == nil || r.Error.Code != -32021 {
			t.Errorf("%s without the extension: %v, want -32021", tool, r)
		}
	}

	// confirm_delete: one question inside the task, answered.
	r := call(with, "confirm_delete", map[string]any{"filename": "a.txt"})
	id, _ := r.Result["taskId"].(string)
	if r.Result["resultType"] != "task" || id == "" {
		t.Fatalf("confirm_delete: %v", r)
	}
	r = pollTask(t, with, id, "input_required")
	if reqs, _ := r.Result["inputRequests"].(map[string]any); reqs["confirm"] == nil {
		t.Fatalf("inputRequests %v", r.Result["inputRequests"])
	}
	with.Call(t, task.MethodUpdate, map[string]any{"taskId": id,
		"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}})
	r = pollTask(t, with, id, "completed")
	if res, _ := r.Result["result"].(map[string]any); res == nil || (adaptertest.Response{Result: res}).Text() != "deleted a.txt" {
		t.Errorf("confirm_delete result: %v", r)
	}

	// protocol_error_job fails with -32603, no result.
	r = call(with, "protocol_error_job", map[string]any{})
	id, _ = r.Result["taskId"].(string)
	r = pollTask(t, with, id, "failed")
	if e, _ := r.Result["error"].(map[string]any); e["code"] != float64(-32603) || r.Result["result"] != nil {
		t.Errorf("protocol_error_job: %v", r)
	}

	// slow_compute cancelled while it runs settles cancelled.
	r = call(with, "slow_compute", map[string]any{"seconds": 60, "label": "long"})
	id, _ = r.Result["taskId"].(string)
	if ack := with.Call(t, task.MethodCancel, map[string]any{"taskId": id}); ack.Error != nil || len(ack.Result) != 1 {
		t.Fatalf("cancel: %v", ack)
	}
	pollTask(t, with, id, "cancelled")
}
