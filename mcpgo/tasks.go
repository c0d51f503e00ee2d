package mcpgo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Tasks (the io.modelcontextprotocol/tasks extension, SEP-2663) on an
// mcp-go server: Options.Tasks turns them on. The adapter then advertises
// the extension in server/discover, serves tasks/get, tasks/update and
// tasks/cancel of 2026-07-28 requests, and a tool handler registered with
// AddTool may turn its call into a task with ToolFlow.RunTask.
//
// mcp-go has no seam for a method of its own nor for a result that is not
// its tool result, so tasks need Handler, as a resource's pause does:
//
//   - Handler reads a 2026-07-28 tasks/* request, checks its Mcp-Method
//     and Mcp-Name headers (mcp-go knows neither for these methods) and
//     puts it in the exchange;
//   - mcp-go validates the request as it validates every 2026-07-28 one
//     and calls its OnRequestInitialization hooks with the context its
//     HTTP context functions made; the adapter's hook serves the request
//     there (adapt.ServeTask: the -32021 gate, the principal, one lookup
//     of (server, principal, task id)) and stops mcp-go with a marker
//     error;
//   - Handler's rewriter replaces the marker's response with the answer,
//     and the placeholder result of a tools/call whose handler ran RunTask
//     with its CreateTaskResult.
//
// Every other request, and every request of an older client (mcp-go's own
// 2025-11-25 tasks included), passes as it did.

// taskAnswered is the message of the error that stops mcp-go once the
// adapter answered a tasks/* request; Handler replaces the response.
const taskAnswered = "mcpgo: tasks request answered by the adapter"

var errTaskAnswered = errors.New(taskAnswered)

// taskExchange is what the exchange of one request carries for tasks.
type taskExchange struct {
	call    *taskCall       // a 2026-07-28 tasks/* request, for the hook (set before mcp-go runs)
	reply   *taskReply      // the hook's answer to call
	created json.RawMessage // the CreateTaskResult of a tools/call that became a task
}

// taskCall is a 2026-07-28 tasks/* request Handler read.
type taskCall struct {
	method string
	params json.RawMessage
}

// taskReply is the answer to a taskCall: a result, or an error.
type taskReply struct {
	result json.RawMessage
	err    *adapt.WireError
}

// installTasks adds the extension's hooks to the server.
func (a *Adapter) installTasks(hooks *server.Hooks) {
	hooks.AddOnRequestInitialization(a.serveTask)
	hooks.AddAfterDiscover(func(_ context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		if res == nil {
			return
		}
		// A copy: mcp-go hands out the server's own map.
		ext := maps.Clone(res.Capabilities.Extensions)
		if ext == nil {
			ext = map[string]any{}
		}
		ext[task.Extension] = map[string]any{}
		res.Capabilities.Extensions = ext
	})
}

// readTask reads a 2026-07-28 request for Handler: a tasks/* request whose
// headers do not match its body is answered here (HTTP 400, -32020), and
// reported; any other tasks/* request is put in the exchange for the hook.
func (a *Adapter) readTask(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	version := r.Header.Get(mcp.HeaderProtocolVersion)
	if a.tasks == nil || !mcp.IsModernProtocol(version) || !bytes.Contains(x.body, []byte(`"tasks/`)) {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(x.body, &msg) != nil || !task.IsMethod(msg.Method) {
		return false
	}
	if err := mcp.ValidateStandardHeaders(r.Header.Get, version, mcp.MCPMethod(msg.Method), msg.Params); err != nil {
		adapt.WriteError(w, msg.ID, http.StatusBadRequest, &adapt.WireError{Code: mcpwire.CodeHeaderMismatch, Message: err.Error()})
		return true
	}
	if adapt.TaskNameMismatch(w, r, x.body) {
		return true
	}
	x.tasks = &taskExchange{call: &taskCall{method: msg.Method, params: msg.Params}}
	return false
}

// serveTask is the OnRequestInitialization hook that answers the tasks/*
// request Handler read, with the context mcp-go's HTTP context functions
// made (where a principal may come from).
func (a *Adapter) serveTask(ctx context.Context, _ any, _ any) error {
	x := exchangeFrom(ctx)
	if x == nil {
		return nil
	}
	x.mu.Lock()
	t := x.tasks
	x.mu.Unlock()
	if t == nil || t.call == nil {
		return nil
	}
	var p struct {
		adapt.TaskParams
		Meta *mcp.Meta `json:"_meta"`
	}
	reply := &taskReply{}
	if err := json.Unmarshal(t.call.params, &p); err != nil {
		reply.err = adapt.InvalidTaskParams
	} else {
		c := task.Call{Method: t.call.method}
		if p.Meta != nil {
			c.Meta = p.Meta.AdditionalFields
		}
		raw, err := adapt.ServeTask(ctx, a.tasks, c, declaresTasks(p.Meta), p.TaskParams,
			func() (reqstate.Principal, error) { return a.principal(ctx) }, a.logger)
		reply.result = raw
		if err != nil {
			// A principal's own error goes out as mcp-go sends a
			// handler's: -32603 with its text.
			reply.err = adapt.Wire(err)
			if reply.err == nil {
				reply.err = &adapt.WireError{Code: mcpwire.CodeInternalError, Message: err.Error()}
			}
		}
	}
	x.mu.Lock()
	t.reply, x.modern = reply, true
	x.mu.Unlock()
	return errTaskAnswered
}

// declaresTasks reports whether a request's _meta declares the extension
// in its clientCapabilities.
func declaresTasks(meta *mcp.Meta) bool {
	if meta == nil {
		return false
	}
	caps, _ := meta.AdditionalFields[mcpwire.MetaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[task.Extension].(map[string]any)
	return ok
}

// MissingTasksError returns the -32021 error of a tool that can only run
// as a task, for a client that did not declare the extension:
// data.requiredCapabilities.extensions names it. Return it from the
// handler; Handler gives it its exact form.
func MissingTasksError() error { return adapt.MissingTasks }

// TaskOptions are what a handler chooses for a task it starts: its TTL
// (ttlMs, capped by the manager's MaxTTL), the pollIntervalMs suggested to
// the client, and its first statusMessage. The zero value takes the
// task.Manager's defaults.
type TaskOptions = task.Spec

// TaskFunc is the work of a task. Its result completes the task (an
// isError result too: a tool error is a completed task). An error fails
// the task: mrtr's errors (such as Task.Ask's -32021) with their JSON-RPC
// error, any other with -32603 and the error's text, as mcp-go answers a
// handler's error; a panic fails it with -32603 and no text. ctx ends when
// the client cancels the task (tasks/cancel, on any replica), the TTL
// passes or the node loses the task's lease.
type TaskFunc func(ctx context.Context, t *Task) (*mcp.CallToolResult, error)

// toolTask is what a ToolFlow needs to turn its call into a task.
type toolTask struct {
	a         *Adapter
	meta      *mcp.Meta
	principal reqstate.Principal
	call      *adapt.Call // the tools/call, for the task's events
	modern    bool        // a 2026-07-28 request
	ran       atomic.Bool
}

// TasksDeclared reports whether this call may become a task: the adapter
// has tasks (Options.Tasks), the request is a 2026-07-28 one and it
// declared the extension (clientCapabilities.extensions). A tool that can
// run either way runs on the call when it is false; one that can only run
// as a task returns MissingTasksError.
func (f *ToolFlow[C]) TasksDeclared() bool {
	t := &f.tt
	return t.a != nil && t.a.tasks != nil && t.modern && declaresTasks(t.meta)
}

// RunTask turns the call into a task: it creates the task, durable in the
// store before the call answers, starts work on its own goroutine, and
// returns the result to return from the handler, which the client
// receives as a CreateTaskResult. Input gathered in earlier rounds of the
// call (its Flow) is the handler's to pass to work. Without the extension
// declared (TasksDeclared) it returns MissingTasksError and starts
// nothing; on a server not served through Handler it returns an error and
// starts nothing. It panics without Options.Tasks, or when called twice in
// one call.
func (f *ToolFlow[C]) RunTask(ctx context.Context, opts *TaskOptions, work TaskFunc) (*mcp.CallToolResult, error) {
	t := &f.tt
	if t.a == nil || t.a.tasks == nil {
		panic("mcpgo: RunTask needs an adapter with Options.Tasks")
	}
	if !f.TasksDeclared() {
		return nil, MissingTasksError()
	}
	x := exchangeFrom(ctx)
	if x == nil {
		return nil, errTaskNeedsHandler
	}
	var spec task.Spec
	if opts != nil {
		spec = *opts
	}
	if t.ran.Swap(true) {
		panic("mcpgo: RunTask called twice in one call")
	}
	caps := adapt.Declared(f.core)
	created, err := t.a.tasks.Start(t.call.TaskContext(ctx), t.principal, spec, func(ctx context.Context, r *task.Run) (json.RawMessage, error) {
		return outcome(work(ctx, &Task{run: r, caps: caps}))
	})
	if err != nil {
		t.a.logger.ErrorContext(ctx, "mcpgo: could not start a task", "err", err)
		return nil, adapt.Internal
	}
	x.mu.Lock()
	if x.tasks == nil {
		x.tasks = &taskExchange{}
	}
	x.tasks.created = created
	x.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
}

// errTaskNeedsHandler is RunTask on a server not served through Handler,
// which alone can answer a tools/call with a CreateTaskResult.
var errTaskNeedsHandler = errors.New("mcpgo: a tool can run as a task only on a server served through mcpgo's Handler")

// outcome turns what a TaskFunc returned into what the task keeps.
func outcome(res *mcp.CallToolResult, err error) (json.RawMessage, error) {
	if err != nil {
		w := adapt.Wire(err)
		if w == nil {
			w = &adapt.WireError{Code: mcpwire.CodeInternalError, Message: err.Error()}
		}
		return nil, &task.RPCError{Code: int64(w.Code), Message: w.Message, Data: w.Data}
	}
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	return json.Marshal(res)
}

// Task is a running task, as its TaskFunc sees it: the work's view of a
// task.Run, with the capabilities its creator declared. It is safe for
// concurrent use.
type Task struct {
	caps mcpwire.Caps // what the creating request declared, for Ask's gate
	run  *task.Run
}

// SetStatus sets the task's statusMessage, which tasks/get shows (the
// extension has no progress notifications).
func (t *Task) SetStatus(ctx context.Context, message string) error {
	return t.run.SetMessage(ctx, message)
}

// ID returns the task id.
func (t *Task) ID() string { return t.run.ID() }

// Ask puts reqs in the task's inputRequests (status input_required) and
// waits until the client answered every one through tasks/update, on any
// replica, or ctx ends; it returns the answers decoded for their requests
// (Elicitation, Sampling or Roots set). Keys must be new to the task. As a
// paused call's Ask, it refuses with a -32021 error a request the client
// that created the task did not declare a capability for. An answer that
// does not fit its request (an elicitation result for an elicitation, and
// so on) is never taken: the key stays outstanding.
func (t *Task) Ask(ctx context.Context, reqs mcp.InputRequests) (mcp.InputResponses, error) {
	if err := adapt.Gate(t.caps, needsOf(reqs)); err != nil {
		return nil, err
	}
	raw := make(map[string]json.RawMessage, len(reqs))
	for k, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		raw[k] = b
	}
	got, err := t.run.Ask(ctx, raw)
	if err != nil {
		return nil, err
	}
	answers := make(mcp.InputResponses, len(got))
	for k, v := range got {
		var r mcp.InputResponse
		if err := r.UnmarshalJSON(v); err != nil {
			return nil, err
		}
		answers[k] = r
	}
	if err := answers.DecodeFor(reqs); err != nil {
		return nil, err
	}
	return answers, nil
}
