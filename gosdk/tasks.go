package gosdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Tasks (the io.modelcontextprotocol/tasks extension, SEP-2663) on a go-sdk
// server: Options.Tasks turns them on. The adapter then advertises the
// extension in server/discover and serves tasks/get, tasks/update and
// tasks/cancel (custom methods of go-sdk, answered by its middleware), and
// a tool handler registered with AddTool may turn its call into a task
// with ToolFlow.RunTask.
//
// Every tasks/* request passes, in this order: the -32021 gate (the
// request must declare the extension, before anything is looked up), the
// principal (Options.Principal), and one lookup of (server, principal,
// task id) in the store: a task of another caller or server answers
// exactly as an unknown id does (-32602, task.UnknownMessage).

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	adapt.TaskParams
}

// rawResult is a result written as the JSON it holds.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// createdResult is the CreateTaskResult a tools/call answers with once its
// handler turned it into a task.
type createdResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

// MarshalJSON writes the CreateTaskResult (resultType "task"), never the
// placeholder tool result.
func (r createdResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// taskSlot carries, in the context of a tools/call, the manager to a
// handler's RunTask and the CreateTaskResult back to the middleware.
type taskSlot struct {
	m       *task.Manager
	created json.RawMessage
}

type taskSlotKey struct{}

func slotFrom(ctx context.Context) *taskSlot {
	s, _ := ctx.Value(taskSlotKey{}).(*taskSlot)
	return s
}

// installTasks registers the extension's methods on the server.
func (a *Adapter) installTasks() {
	stub := func(context.Context, *mcp.ServerSession, *taskParams) (*rawResult, error) {
		// The middleware answers every tasks/* request; this runs only if
		// another middleware calls past it.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpwire.InternalMessage}
	}
	for _, m := range []string{task.MethodGet, task.MethodUpdate, task.MethodCancel} {
		if err := mcp.AddReceivingCustomMethod(a.server, m, stub); err != nil {
			panic("gosdk: " + err.Error())
		}
	}
}

// tasksMiddleware serves the extension's part of a request, or passes it on.
func (a *Adapter) tasksMiddleware(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	switch {
	case task.IsMethod(method):
		return a.serveTask(ctx, method, req)
	case method == "server/discover":
		res, err := next(ctx, method, req)
		if d, ok := res.(*mcp.DiscoverResult); ok && err == nil && d.Capabilities != nil {
			d.Capabilities.AddExtension(task.Extension, map[string]any{})
		}
		return res, err
	}
	return next(ctx, method, req)
}

// declaresTasks reports whether caps declare the extension.
func declaresTasks(caps *mcp.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[task.Extension].(map[string]any)
	return ok
}

// MissingTasksError returns the -32021 error of a tool that can only run
// as a task, for a client that did not declare the extension:
// data.requiredCapabilities.extensions names it.
func MissingTasksError() error { return wireError(adapt.MissingTasks) }

func (a *Adapter) serveTask(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	sr, ok := req.(*mcp.ServerRequest[*taskParams])
	if !ok || sr.Params == nil {
		return nil, wireError(adapt.InvalidTaskParams)
	}
	raw, err := adapt.ServeTask(ctx, a.tasks, task.Call{Method: method, Meta: sr.Params.Meta}, declaresTasks(sr.ClientCapabilities()), sr.Params.TaskParams,
		func() (reqstate.Principal, error) { return a.principal(ctx, req) }, a.logger)
	if errors.Is(err, ErrNoSubject) {
		return nil, errNoSubjectWire
	}
	if err != nil {
		return nil, wireError(err)
	}
	return &rawResult{raw: raw}, nil
}

// TaskOptions are what a handler chooses for a task it starts. The zero
// value takes the task.Manager's defaults.
type TaskOptions struct {
	// TTL is how long the task lives from its creation (ttlMs), capped by
	// the manager's MaxTTL.
	TTL time.Duration
	// PollInterval is the pollIntervalMs suggested to the client.
	PollInterval time.Duration
	// Message is the task's first statusMessage.
	Message string
}

// TaskFunc is the work of a task. Its result completes the task (an
// isError result too: a tool error is a completed task). A *jsonrpc.Error
// fails the task with that error; any other error completes it with an
// isError result carrying the error's text, as go-sdk does for a tool
// handler's error; a panic fails it with -32603. ctx ends when the client
// cancels the task (tasks/cancel, on any replica), the TTL passes or the
// node loses the task's lease.
type TaskFunc func(ctx context.Context, t *Task) (*mcp.CallToolResult, error)

// TasksDeclared reports whether this call may become a task: the adapter
// has tasks (Options.Tasks) and the request declared the extension
// (clientCapabilities.extensions). A tool that can run either way runs
// synchronously when it is false; one that can only run as a task returns
// MissingTasksError.
func (f *ToolFlow[C]) TasksDeclared() bool {
	if f.legacy || f.call.Version < adapt.ModernVersion {
		return false
	}
	return declaresTasks(f.call.fullCaps())
}

// RunTask turns the call into a task: it creates the task, durable in the
// store before the call answers, starts work on its own goroutine, and
// returns the result to return from the handler, which the client
// receives as a CreateTaskResult. Input gathered in earlier rounds of the
// call (its Flow) is the handler's to pass to work. Without the extension
// declared (TasksDeclared) it returns MissingTasksError and starts
// nothing.
func (f *ToolFlow[C]) RunTask(ctx context.Context, opts *TaskOptions, work TaskFunc) (*mcp.CallToolResult, error) {
	slot := slotFrom(ctx)
	if slot == nil || slot.m == nil {
		panic("gosdk: RunTask needs an adapter with Options.Tasks and the handler's own context")
	}
	if slot.created != nil {
		panic("gosdk: RunTask called twice in one call")
	}
	if !f.TasksDeclared() {
		return nil, MissingTasksError()
	}
	var o TaskOptions
	if opts != nil {
		o = *opts
	}
	caps := adapt.Declared(f.core)
	created, err := slot.m.Start(f.call.TaskContext(ctx), f.call.Principal, task.Spec{TTL: o.TTL, PollInterval: o.PollInterval, Message: o.Message},
		func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
			return outcome(work(ctx, &Task{run: r, caps: caps}))
		})
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpwire.InternalMessage}
	}
	slot.created = created
	return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
}

// outcome turns what a TaskFunc returned into what the task keeps.
func outcome(res *mcp.CallToolResult, err error) (json.RawMessage, error) {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		rpc := &task.RPCError{Code: je.Code, Message: je.Message}
		if je.Data != nil {
			rpc.Data = je.Data
		}
		return nil, rpc
	case err != nil:
		res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
	case res == nil:
		res = &mcp.CallToolResult{}
	}
	if res.Content == nil {
		r := *res
		r.Content = []mcp.Content{}
		res = &r
	}
	return json.Marshal(res)
}

// Task is a running task, as its TaskFunc sees it. It is safe for
// concurrent use.
type Task struct {
	run  *task.Run
	caps mcpwire.Caps
}

// ID returns the task id.
func (t *Task) ID() string { return t.run.ID() }

// SetStatus sets the task's statusMessage, which tasks/get shows (the
// extension has no progress notifications).
func (t *Task) SetStatus(ctx context.Context, message string) error {
	return t.run.SetMessage(ctx, message)
}

// Ask puts reqs in the task's inputRequests (status input_required) and
// waits until the client answered every one through tasks/update, on any
// replica, or ctx ends. Keys must be new to the task. As a paused call's
// Ask, it refuses with a -32021 error a request the client that created
// the task did not declare a capability for. An answer that does not fit
// its request (an elicitation result for an elicitation, and so on) is
// never taken: the key stays outstanding.
func (t *Task) Ask(ctx context.Context, reqs mcp.InputRequestMap) (*TaskAnswers, error) {
	if err := adapt.Gate(t.caps, needsOf(reqs)); err != nil {
		return nil, wireError(err)
	}
	data, err := reqs.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	got, err := t.run.Ask(ctx, raw)
	if err != nil {
		return nil, err
	}
	data, err = json.Marshal(got)
	if err != nil {
		return nil, err
	}
	var answers mcp.InputResponseMap
	if err := json.Unmarshal(data, &answers); err != nil {
		return nil, err
	}
	return &TaskAnswers{m: answers}, nil
}

// TaskAnswers are the answers to one Task.Ask.
type TaskAnswers struct{ m mcp.InputResponseMap }

// Elicited returns the answer to elicitation key.
func (a *TaskAnswers) Elicited(key string) (*mcp.ElicitResult, bool) {
	r, ok := a.m[key].(*mcp.ElicitResult)
	return r, ok
}

// Sampled returns the answer to sampling request key.
func (a *TaskAnswers) Sampled(key string) (*mcp.CreateMessageWithToolsResult, bool) {
	r, ok := a.m[key].(*mcp.CreateMessageWithToolsResult)
	return r, ok
}

// Roots returns the answer to roots request key.
func (a *TaskAnswers) Roots(key string) (*mcp.ListRootsResult, bool) {
	r, ok := a.m[key].(*mcp.ListRootsResult)
	return r, ok
}

// taskNameMismatch answers a 2026-07-28 tasks/* request whose Mcp-Name
// header is not its params.taskId with HTTP 400 and -32020, as go-sdk does
// for the methods it knows (adapt.TaskNameMismatch), and reports whether it
// did.
func taskNameMismatch(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return adapt.TaskNameMismatch(w, r, body)
}
