package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
	"github.com/mrtr-go/mrtr/task/redistask"
)

// BenchmarkTask compares a task with one input round (issue 38 item 7)
// with the same work done as a paused call, on one go-sdk server
// (gosdk.Install, gosdk.NewHTTPHandler) over loopback HTTP, with the same
// raw 2026-07-28 client for both, so the difference is what mrtr and the
// protocol add:
//
//   - paused: tools/call "deploy" pauses with one elicitation (flow.Ask;
//     the guard seals the state and reserves its id in the single-use
//     store on the resume), the client calls again with the answer and the
//     requestState, and gets the result: two requests;
//   - task: tools/call "deploy-task" becomes a task (flow.RunTask, durable
//     in the task store before its CreateTaskResult), whose work asks the
//     same elicitation (Task.Ask); the client polls tasks/get until the
//     task is input_required, answers with tasks/update, and polls tasks/get
//     until it is completed, with the result. Polls are back to back (a
//     real client waits pollIntervalMs between them): requests/op says how
//     many requests an op took.
//
// Each runs on the memory stores (replay.Memory, task.NewMemory) and on
// Redis (redisstore for the guard, redistask for the tasks) when a
// redis-server is on PATH (a local one is started; the Redis
// sub-benchmarks skip without one). Every run of a sub-benchmark gets a
// server of its own.
//
// Run: go test -run '^$' -bench 'Task$' -count 5 (see docs/BENCHMARKS.md).
func BenchmarkTask(b *testing.B) {
	var redisURL string
	if _, err := exec.LookPath("redis-server"); err == nil {
		redisURL = testredis.Start(b)
	}
	for _, store := range []string{"memory", "redis"} {
		for _, kind := range []string{"paused", "task"} {
			b.Run(kind+"-"+store, func(b *testing.B) {
				if store == "redis" && redisURL == "" {
					b.Skip("no redis-server on PATH")
				}
				url, requests := newTaskBed(b, store, redisURL)
				c := &adaptertest.Client{URL: url, Caps: map[string]any{"elicitation": map[string]any{},
					"extensions": map[string]any{task.Extension: map[string]any{}}}}
				op := pausedOp
				if kind == "task" {
					op = taskOp
				}
				op(b, c) // warms the connection and the caches
				runtime.GC()
				b.ReportAllocs()
				before, cpu := requests(), processCPU()
				b.ResetTimer()
				for b.Loop() {
					op(b, c)
				}
				if cpu > 0 {
					b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
				}
				b.ReportMetric(float64(requests()-before)/float64(b.N), "requests/op")
			})
		}
	}
}

// newTaskBed starts a server with the deploy and deploy-task tools over
// the stores named, for the duration of b, and returns its URL and a count
// of the requests it served.
func newTaskBed(b *testing.B, store, redisURL string) (string, func() int64) {
	var rstore replay.Store = replay.NewMemory(nil)
	var tstore task.Store = task.NewMemory(nil)
	if store == "redis" {
		rs, err := redisstore.NewFromURL(redisURL, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rs.Close() })
		rstore, tstore = rs, redistask.New(rs, nil)
	}
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	tasks := task.NewManager(tstore, nil)
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-tasks", Version: "1"}, nil)
	a := gosdk.Install(s, mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: rstore}), &gosdk.Options{Tasks: tasks})
	gosdk.AddTool(a, &mcp.Tool{Name: "deploy", Description: "deploy a service"},
		func(ctx context.Context, req *mcp.CallToolRequest, args FlowArgs, flow *gosdk.ToolFlow[FlowState]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(FlowState(args), confirm(args.Service, args.Env))
			}
			if ans, ok := flow.Elicited("confirm"); !ok || !approved(ans) {
				return cancelled, nil
			}
			return textResult(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	gosdk.AddTool(a, &mcp.Tool{Name: "deploy-task", Description: "deploy a service, as a task"},
		func(ctx context.Context, req *mcp.CallToolRequest, args FlowArgs, flow *gosdk.ToolFlow[FlowState]) (*mcp.CallToolResult, error) {
			return flow.RunTask(ctx, nil, func(ctx context.Context, t *gosdk.Task) (*mcp.CallToolResult, error) {
				ans, err := t.Ask(ctx, confirm(args.Service, args.Env))
				if err != nil {
					return nil, err
				}
				if r, ok := ans.Elicited("confirm"); !ok || !approved(r) {
					return cancelled, nil
				}
				return textResult(fmt.Sprintf("deployed %s to %s", args.Service, args.Env)), nil
			})
		})
	var n atomic.Int64
	h := gosdk.NewHTTPHandler(s, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.URL, n.Load
}

var approve = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}

// pausedOp runs the deploy tool as a paused call: two requests.
func pausedOp(b *testing.B, c *adaptertest.Client) {
	r := c.Call(b, "tools/call", map[string]any{"name": "deploy", "arguments": FlowCallArgs})
	st := r.State()
	if st == "" {
		b.Fatalf("first round: %v", r)
	}
	r = c.Call(b, "tools/call", map[string]any{"name": "deploy", "arguments": FlowCallArgs, "requestState": st, "inputResponses": approve})
	if r.Error != nil || r.Text() != FlowWant {
		b.Fatalf("second round: %v", r)
	}
}

// taskOp runs the deploy-task tool as a task: create, poll until
// input_required, answer, poll until completed.
func taskOp(b *testing.B, c *adaptertest.Client) {
	d := adaptertest.MustTask(b, c.Call(b, "tools/call", map[string]any{"name": "deploy-task", "arguments": FlowCallArgs}))
	if d.ResultType != "task" || d.TaskID == "" {
		b.Fatalf("tools/call: %+v", d)
	}
	id := d.TaskID
	poll := func(st task.Status) adaptertest.Detailed {
		deadline := time.Now().Add(10 * time.Second)
		for {
			d := adaptertest.MustTask(b, c.Call(b, task.MethodGet, map[string]any{"taskId": id}))
			if d.Status == st {
				return d
			}
			if d.Status.Terminal() || time.Now().After(deadline) {
				b.Fatalf("task %s, want %s", d.Status, st)
			}
		}
	}
	poll(task.InputRequired)
	if r := c.Call(b, task.MethodUpdate, map[string]any{"taskId": id, "inputResponses": approve}); !adaptertest.IsAck(r) {
		b.Fatalf("tasks/update: %v", r)
	}
	if got := poll(task.Completed).Text(); got != FlowWant {
		b.Fatalf("result %q", got)
	}
}
