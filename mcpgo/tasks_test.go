package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// TestTasks runs the tasks suite against mcp-go servers.
func TestTasks(t *testing.T) {
	adaptertest.RunTasks(t, func(t *testing.T, store task.Store, o *task.Options) *adaptertest.TaskNode {
		return startTaskNode(t, task.NewManager(store, o), nil)
	})
}

// startTaskNode is one replica: an mcp-go server with tasks from m and the
// suite's fixtures (plus "fail", "toolerror" and "maybe"), served through
// NewHTTPHandler. Its principal is the subject the bearer token names
// (none: anonymous), put into the context by mcp-go's HTTP context
// function, so the tasks/* requests see the caller only inside mcp-go.
// extra are more server options.
func startTaskNode(t *testing.T, m *task.Manager, extra []server.ServerOption) *adaptertest.TaskNode {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := server.NewMCPServer("tasks", "1", append([]server.ServerOption{server.WithToolCapabilities(false)}, extra...)...)
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), nil), &mcpgo.Options{Tasks: m})
	n := &adaptertest.TaskNode{Cancelled: make(chan string, 16)}
	type none struct{}
	elicit := func(msg string) mcp.InputRequest {
		return mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: msg, RequestedSchema: map[string]any{"type": "object"}})
	}
	mcpgo.AddTool(a, mcp.NewTool("ask"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, &mcpgo.TaskOptions{TTL: time.Minute, PollInterval: 100 * time.Millisecond, Message: "asking"},
			func(ctx context.Context, tk *mcpgo.Task) (*mcp.CallToolResult, error) {
				ans, err := tk.Ask(ctx, mcp.InputRequests{"a": elicit("a?"), "b": elicit("b?")})
				if err != nil {
					return nil, err
				}
				v := func(k string) any { c, _ := ans[k].Elicitation.Content.(map[string]any); return c["v"] }
				return mcp.NewToolResultText(fmt.Sprintf("a=%v b=%v", v("a"), v("b"))), nil
			})
	})
	mcpgo.AddTool(a, mcp.NewTool("wait"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(ctx context.Context, tk *mcpgo.Task) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			n.Cancelled <- tk.ID()
			return nil, ctx.Err()
		})
	})
	mcpgo.AddTool(a, mcp.NewTool("sample"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(ctx context.Context, tk *mcpgo.Task) (*mcp.CallToolResult, error) {
			_, err := tk.Ask(ctx, mcp.InputRequests{"s": mcp.NewSamplingInputRequest(mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}}})})
			return nil, err
		})
	})
	mcpgo.AddTool(a, mcp.NewTool("fail"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(context.Context, *mcpgo.Task) (*mcp.CallToolResult, error) {
			return nil, errors.New("the disk is full")
		})
	})
	mcpgo.AddTool(a, mcp.NewTool("toolerror"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(context.Context, *mcpgo.Task) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("no such file"), nil
		})
	})
	// mixed asks an elicitation, a sampling request and the roots at once.
	mcpgo.AddTool(a, mcp.NewTool("mixed"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(ctx context.Context, tk *mcpgo.Task) (*mcp.CallToolResult, error) {
			ans, err := tk.Ask(ctx, mcp.InputRequests{"e": elicit("e?"), "r": mcp.NewRootsInputRequest(),
				"s": mcp.NewSamplingInputRequest(mcp.CreateMessageParams{MaxTokens: 10,
					Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}}})})
			if err != nil {
				return nil, err
			}
			c, _ := ans["e"].Elicitation.Content.(map[string]any)
			return mcp.NewToolResultText(fmt.Sprintf("e=%v s=%s r=%s", c["v"], ans["s"].Sampling.Model, ans["r"].Roots.Roots[0].URI)), nil
		})
	})
	// chatty sends a log notification (mcp-go answers on an event stream
	// then) before it turns into a task.
	mcpgo.AddTool(a, mcp.NewTool("chatty"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": "starting"})
		time.Sleep(20 * time.Millisecond) // the notification goes out first
		return f.RunTask(ctx, nil, func(context.Context, *mcpgo.Task) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("chatted"), nil
		})
	})
	// maybe runs as a task when the caller declared the extension, on the
	// call otherwise.
	mcpgo.AddTool(a, mcp.NewTool("maybe"), func(ctx context.Context, _ mcp.CallToolRequest, _ none, f *mcpgo.ToolFlow[none]) (*mcp.CallToolResult, error) {
		work := func(context.Context, *mcpgo.Task) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("done"), nil
		}
		if f.TasksDeclared() {
			return f.RunTask(ctx, nil, work)
		}
		return work(ctx, nil)
	})
	h := mcpgo.NewHTTPHandler(a, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		if u, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && u != "" {
			return mcpgo.WithPrincipal(ctx, reqstate.Principal{Issuer: "test", Subject: u})
		}
		return ctx
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}

func quickManager(store task.Store) *task.Manager {
	return task.NewManager(store, &task.Options{Watch: 50 * time.Millisecond, AnswerPoll: 20 * time.Millisecond})
}

// TestTaskOutcomes: a tool error completes the task with the isError
// result; a handler's error fails it with -32603 and the error's text, as
// mcp-go answers a handler's error on the call.
func TestTaskOutcomes(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), nil)
	d := adaptertest.WaitTask(t, n.URL, "alice", adaptertest.CreateTask(t, n.URL, "alice", "toolerror"), task.Completed)
	if d.Result["isError"] != true || d.Text() != "no such file" || d.Error != nil {
		t.Errorf("a tool error: %+v", d)
	}
	d = adaptertest.WaitTask(t, n.URL, "alice", adaptertest.CreateTask(t, n.URL, "alice", "fail"), task.Failed)
	var e struct {
		Code    int
		Message string
	}
	if json.Unmarshal(d.Error, &e) != nil || e.Code != -32603 || e.Message != "the disk is full" || d.Result != nil {
		t.Errorf("a failed task: %+v", d)
	}
}

// TestTaskOnlyWhenAsked: a request that did not declare the extension
// never gets a task; a tool that can run either way runs on its call.
func TestTaskOnlyWhenAsked(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), nil)
	r := adaptertest.TaskClient(n.URL, "alice", false).Call(t, "tools/call", map[string]any{"name": "maybe", "arguments": map[string]any{}})
	if r.Error != nil || r.Result["resultType"] != "complete" || r.Result["taskId"] != nil || r.Text() != "done" {
		t.Errorf("maybe without the extension: %v", r)
	}
	id := adaptertest.CreateTask(t, n.URL, "alice", "maybe")
	if d := adaptertest.WaitTask(t, n.URL, "alice", id, task.Completed); d.Text() != "done" {
		t.Errorf("maybe as a task: %+v", d)
	}
	// An older client, on a session, is never given a task either.
	c := adaptertest.TaskClient(n.URL, "alice", true)
	c.Initialize(t, "2025-11-25", map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{task.Extension: map[string]any{}}})
	if r := c.Call(t, "tools/call", map[string]any{"name": "maybe", "arguments": map[string]any{}}); r.Error != nil || r.Result["taskId"] != nil || r.Text() != "done" {
		t.Errorf("maybe for a 2025-11-25 session: %v", r)
	}
}

// TestTaskCancel: tasks/cancel turns the task cancelled and ends its
// work's context; a second cancel, and a cancel of a finished task, are
// acknowledged and change nothing.
func TestTaskCancel(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), nil)
	id := adaptertest.CreateTask(t, n.URL, "alice", "wait")
	for range 2 {
		if r := adaptertest.TaskClient(n.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id}); !adaptertest.IsAck(r) {
			t.Fatalf("cancel: %v", r)
		}
	}
	n.WaitCancelled(t, id)
	if d := adaptertest.GetTask(t, n.URL, "alice", id); d.Status != task.Cancelled {
		t.Errorf("status %s after cancel", d.Status)
	}
	id = adaptertest.CreateTask(t, n.URL, "alice", "toolerror")
	adaptertest.WaitTask(t, n.URL, "alice", id, task.Completed)
	if r := adaptertest.TaskClient(n.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id}); !adaptertest.IsAck(r) {
		t.Fatalf("cancel of a completed task: %v", r)
	}
	if d := adaptertest.GetTask(t, n.URL, "alice", id); d.Status != task.Completed {
		t.Errorf("a completed task turned %s", d.Status)
	}
}

// TestTasksDiscover: server/discover advertises the extension beside the
// server's own extensions, and leaves the server's map as it was.
func TestTasksDiscover(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), []server.ServerOption{server.WithExtensions(map[string]any{"example.com/x": map[string]any{}})})
	for range 2 {
		r := adaptertest.TaskClient(n.URL, "", false).Call(t, "server/discover", map[string]any{})
		caps, _ := r.Result["capabilities"].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext[task.Extension].(map[string]any); !ok || ext["example.com/x"] == nil || len(ext) != 2 {
			t.Fatalf("server/discover: %v", r)
		}
	}
}

// TestTasksMcpMethodHeader: a tasks/* request whose Mcp-Method header is
// missing or names another method is refused with HTTP 400 and -32020
// before anything is looked up (mcp-go checks the header only for the
// methods it knows).
func TestTasksMcpMethodHeader(t *testing.T) {
	store := &adaptertest.CountingStore{Store: task.NewMemory(nil)}
	n := startTaskNode(t, quickManager(store), nil)
	body := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"abc","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	for _, method := range []string{"", "tools/list"} {
		h := http.Header{"Mcp-Name": {"abc"}}
		if method != "" {
			h.Set("Mcp-Method", method)
		}
		if r := adaptertest.PostRaw(t, n.URL, h, body); r.Status != 400 || r.Error == nil || r.Error.Code != -32020 {
			t.Errorf("Mcp-Method %q: %v", method, r)
		}
	}
	if got := store.Gets.Load(); got != 0 {
		t.Errorf("%d lookups for refused requests", got)
	}
}

// TestTasksNeedHandler: without Handler, RunTask starts nothing and the
// call fails; tasks/* requests get what mcp-go answers for a method it
// does not serve.
func TestTasksNeedHandler(t *testing.T) {
	store := &adaptertest.CountingStore{Store: task.NewMemory(nil)}
	ring, _ := reqstate.GenerateKeyRing("test", nil)
	s := server.NewMCPServer("tasks", "1", server.WithToolCapabilities(false))
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), nil), &mcpgo.Options{Tasks: quickManager(store)})
	started := false
	mcpgo.AddTool(a, mcp.NewTool("t"), func(ctx context.Context, _ mcp.CallToolRequest, _ struct{}, f *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
		return f.RunTask(ctx, nil, func(context.Context, *mcpgo.Task) (*mcp.CallToolResult, error) {
			started = true
			return nil, nil
		})
	})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(srv.Close)
	c := adaptertest.TaskClient(srv.URL, "", true)
	if r := c.Call(t, "tools/call", map[string]any{"name": "t", "arguments": map[string]any{}}); r.Error == nil || r.Result != nil {
		t.Errorf("RunTask without Handler: %v, want an error", r)
	}
	if r := c.Call(t, task.MethodUpdate, map[string]any{"taskId": "x", "inputResponses": map[string]any{}}); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("tasks/update without Handler: %v, want -32601", r)
	}
	if started || store.Gets.Load() != 0 {
		t.Errorf("started %v, %d lookups", started, store.Gets.Load())
	}
}

// TestTaskOnEventStream: a tools/call that mcp-go answers on an event
// stream (its handler sent a notification first) still answers with the
// CreateTaskResult.
func TestTaskOnEventStream(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), nil)
	id := adaptertest.CreateTask(t, n.URL, "alice", "chatty")
	if d := adaptertest.WaitTask(t, n.URL, "alice", id, task.Completed); d.Text() != "chatted" {
		t.Errorf("chatty: %+v", d)
	}
}

// TestTaskAsksEveryKind: one Ask of an elicitation, a sampling request and
// the roots, answered in one tasks/update, hands the work each answer
// decoded for its request.
func TestTaskAsksEveryKind(t *testing.T) {
	n := startTaskNode(t, quickManager(task.NewMemory(nil)), nil)
	c := &adaptertest.Client{URL: n.URL, Token: "alice", Caps: map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{},
		"roots": map[string]any{}, "extensions": map[string]any{task.Extension: map[string]any{}}}}
	d := adaptertest.MustTask(t, c.Call(t, "tools/call", map[string]any{"name": "mixed", "arguments": map[string]any{}}))
	d = adaptertest.WaitTask(t, n.URL, "alice", d.TaskID, task.InputRequired)
	if len(d.InputRequests) != 3 {
		t.Fatalf("inputRequests %v", d.InputRequests)
	}
	r := c.Call(t, task.MethodUpdate, map[string]any{"taskId": d.TaskID, "inputResponses": map[string]any{
		"e": map[string]any{"action": "accept", "content": map[string]any{"v": "yes"}},
		"s": map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hello"}, "model": "m1"},
		"r": map[string]any{"roots": []any{map[string]any{"uri": "file:///src"}}},
	}})
	if !adaptertest.IsAck(r) {
		t.Fatalf("tasks/update: %v", r)
	}
	if d = adaptertest.WaitTask(t, n.URL, "alice", d.TaskID, task.Completed); d.Text() != "e=yes s=m1 r=file:///src" {
		t.Errorf("result %q", d.Text())
	}
}

// TestTasksAfterServerHooks: an OnRequestInitialization hook the server
// had before Install runs before tasks/* requests are answered, and its
// refusal stands (nothing is looked up).
func TestTasksAfterServerHooks(t *testing.T) {
	store := &adaptertest.CountingStore{Store: task.NewMemory(nil)}
	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(func(ctx context.Context, _ any, _ any) error {
		if mcpgo.PrincipalFrom(ctx).Subject == "mallory" {
			return errors.New("mallory is banned")
		}
		return nil
	})
	n := startTaskNode(t, quickManager(store), []server.ServerOption{server.WithHooks(hooks)})
	id := adaptertest.CreateTask(t, n.URL, "alice", "wait")
	before := store.Gets.Load()
	r := adaptertest.TaskClient(n.URL, "mallory", true).Call(t, task.MethodGet, map[string]any{"taskId": id})
	if r.Error == nil || r.Error.Code != -32600 || r.Error.Message != "mallory is banned" {
		t.Errorf("tasks/get by a refused caller: %v", r)
	}
	if got := store.Gets.Load() - before; got != 0 {
		t.Errorf("%d lookups for a refused caller", got)
	}
	adaptertest.TaskClient(n.URL, "alice", true).Call(t, task.MethodCancel, map[string]any{"taskId": id})
}
