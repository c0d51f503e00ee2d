package gosdk

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Options configures an Adapter. The zero value is ready to use.
type Options struct {
	// Principal derives the authenticated caller of a request. Nil means
	// the caller of go-sdk's bearer-token middleware (auth.RequireBearerToken):
	// Subject is TokenInfo.UserID and Issuer is TokenInfo.Extra["iss"] when
	// it is a string; no TokenInfo means anonymous. A TokenInfo with an
	// empty UserID is refused (ErrNoSubject), never taken as anonymous.
	// A deployment that accepts tokens of more than one issuer must set
	// Extra["iss"] in its verifier: subjects are only unique per issuer,
	// and without it two issuers' "alice" share one binding. Return an
	// error to refuse the call.
	Principal func(ctx context.Context, req mcp.Request) (reqstate.Principal, error)
	// Logger receives adapter-level problems (a handler that set
	// requestState by hand, a failed legacy round). Nil means no logging;
	// the guard has its own logger.
	Logger *slog.Logger
	// Tasks turns on the tasks extension (io.modelcontextprotocol/tasks):
	// the adapter advertises it, serves tasks/get, tasks/update and
	// tasks/cancel from this manager, and tool handlers may run as tasks
	// (ToolFlow.RunTask). Its Options.Server should be the guard's
	// ServerID. Nil means no tasks: the methods stay unknown (-32601).
	Tasks *task.Manager
}

// Adapter connects a Guard to a go-sdk Server: its middleware watches the
// three pausable methods, and AddTool, AddPrompt, AddResource and
// AddResourceTemplate register handlers that see a typed, verified Flow.
// An Adapter is safe for concurrent use.
type Adapter struct {
	server    *mcp.Server
	guard     *mrtr.Guard
	principal func(context.Context, mcp.Request) (reqstate.Principal, error)
	logger    *slog.Logger
	tasks     *task.Manager
}

// Install adds mrtr's receiving middleware to s and returns the adapter
// to register handlers with. A nil server or guard panics. opts may be nil.
//
// The middleware touches only tools/call, prompts/get and resources/read;
// every other method passes untouched. On those it refuses a result whose
// requestState was not sealed by the guard during the call (a handler
// that set it by hand), and for clients older than 2026-07-28 it keeps
// fulfilling input requests through the session until the flow
// completes, so multi-round flows work on the legacy wire too.
func Install(s *mcp.Server, g *mrtr.Guard, opts *Options) *Adapter {
	if s == nil || g == nil {
		panic("gosdk: Install needs a server and a guard")
	}
	a := &Adapter{server: s, guard: g, principal: tokenPrincipal}
	if opts != nil {
		if opts.Principal != nil {
			a.principal = opts.Principal
		}
		a.logger = opts.Logger
		a.tasks = opts.Tasks
	}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	if a.tasks != nil {
		a.installTasks()
	}
	s.AddReceivingMiddleware(a.middleware)
	return a
}

// Guard returns the adapter's guard.
func (a *Adapter) Guard() *mrtr.Guard { return a.guard }

// Server returns the adapter's server.
func (a *Adapter) Server() *mcp.Server { return a.server }

// ErrNoSubject refuses a call whose verified credential names no
// subject (go-sdk's TokenInfo.UserID is empty): such a caller is
// authenticated but unidentified, and treating it as anonymous would let
// every such caller share one binding. The client gets a JSON-RPC
// invalid-request error.
var ErrNoSubject = errors.New("gosdk: the verified credential names no subject (TokenInfo.UserID is empty)")

// tokenPrincipal is the default principal source: go-sdk's TokenInfo.
func tokenPrincipal(_ context.Context, req mcp.Request) (reqstate.Principal, error) {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return reqstate.Principal{}, nil
	}
	if extra.TokenInfo.UserID == "" {
		return reqstate.Principal{}, ErrNoSubject
	}
	iss, _ := extra.TokenInfo.Extra["iss"].(string)
	return reqstate.Principal{Issuer: iss, Subject: extra.TokenInfo.UserID}, nil
}

type recordKey struct{}

func recordFrom(ctx context.Context) *adapt.Record {
	r, _ := ctx.Value(recordKey{}).(*adapt.Record)
	return r
}

func (a *Adapter) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !mcpwire.Pausable(method) {
			if a.tasks != nil {
				return a.tasksMiddleware(ctx, method, req, next)
			}
			return next(ctx, method, req)
		}
		var slot *taskSlot
		if a.tasks != nil && method == mcpwire.MethodCallTool {
			slot = &taskSlot{m: a.tasks}
			ctx = context.WithValue(ctx, taskSlotKey{}, slot)
		}
		rec := recordFrom(ctx)
		if rec == nil {
			rec = &adapt.Record{}
			ctx = context.WithValue(ctx, recordKey{}, rec)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if slot != nil && slot.created != nil {
			return createdResult{&mcp.CallToolResult{}, slot.created}, nil
		}
		if _, st := pauseOf(res); rec.CheckState(st) != nil {
			a.logger.ErrorContext(ctx, "gosdk: a handler set requestState by hand; register it with gosdk and pause through its Flow", "method", method)
			return nil, wireError(mrtr.ErrHandlerState)
		}
		if legacySession(req) {
			return a.legacyRounds(ctx, method, req, res, next)
		}
		if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil && tr.InputRequests != nil && tr.Content == nil {
			return pausedToolResult{tr}, nil
		}
		return res, nil
	}
}

// pausedToolResult is an input_required tool result, sent without the
// "content": null that go-sdk writes for a result with no Content: a
// paused call has no content yet, and the member is optional there.
type pausedToolResult struct{ *mcp.CallToolResult }

// MarshalJSON is go-sdk's encoding with the member cut out of its bytes,
// in place: every other member stays as go-sdk wrote it, in its order.
// This runs for every pause, so it neither parses the result (its input
// requests carry a whole schema) nor encodes it again: go-sdk writes
// content right after _meta, and mcpwire.CutMember reads only that far.
// The encoding is of a struct, so no member name repeats.
func (r pausedToolResult) MarshalJSON() ([]byte, error) {
	data, err := r.CallToolResult.MarshalJSON()
	if err != nil {
		return nil, err
	}
	data, _ = mcpwire.CutMember(data, "content", "null")
	return data, nil
}

// wireError turns mrtr's errors into the JSON-RPC errors of the error
// contract; other errors pass unchanged. go-sdk sends a *jsonrpc.Error
// as is, with its data, only when it is returned unwrapped.
func wireError(err error) error {
	if w := adapt.Wire(err); w != nil {
		return &jsonrpc.Error{Code: int64(w.Code), Message: w.Message, Data: w.Data}
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	return err
}

// errNoSubjectWire is what the client of ErrNoSubject gets.
var errNoSubjectWire = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "unauthorized: the credential names no subject"}

// call is what the three handler kinds share: the request's identity for
// the guard, and go-sdk's own view of it.
type call struct {
	adapt.Call
	req mcp.Request
	// fullCaps is go-sdk's accessor for the client's capabilities; it is
	// costly (a JSON round trip), so it runs only when a handler asks.
	fullCaps func() *mcp.ClientCapabilities
}

// newCall reads a pausable request; responses are go-sdk's decoded
// inputResponses (nil when absent).
func newCall(req mcp.Request, method, target, version string, args json.RawMessage, state string, responses mcp.InputResponseMap,
	full func() *mcp.ClientCapabilities, meta mcp.Meta) *call {
	c := &call{req: req, fullCaps: full, Call: adapt.Call{Method: method, Target: target, Version: version,
		Arguments: args, State: state, Meta: meta}}
	if responses != nil {
		c.Responses = make(map[string]any, len(responses))
		for k, v := range responses {
			c.Responses[k] = v
		}
	}
	c.Caps = c
	return c
}

// ReadCaps implements adapt.CapsReader.
func (c *call) ReadCaps() mcpwire.Caps { return declaredCapabilities(c.req, c.fullCaps) }

// principalOf derives the caller of c for the guard.
func (a *Adapter) principalOf(ctx context.Context, c *call) error {
	p, err := a.principal(ctx, c.req)
	if errors.Is(err, ErrNoSubject) {
		a.logger.WarnContext(ctx, "gosdk: refused a call whose verified credential names no subject", "method", c.Method)
		return errNoSubjectWire
	}
	if err != nil {
		return err
	}
	c.Principal = p
	return nil
}
