package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// Options configures an Adapter. The zero value is ready to use.
type Options struct {
	// Principal derives the authenticated caller of a request. Nil means
	// the principal that WithPrincipal put into the request's context (an
	// HTTP middleware that verified a bearer token, or a
	// server.WithHTTPContextFunc); none there means anonymous. mcp-go has
	// no authentication of its own to read it from. Return an error to
	// refuse the call.
	Principal func(ctx context.Context) (reqstate.Principal, error)
	// Logger receives adapter-level problems (a handler that set
	// requestState by hand, a stale continuation, a failed legacy round).
	// Nil means no logging; the guard has its own logger.
	Logger *slog.Logger
	// Tasks turns on the tasks extension (io.modelcontextprotocol/tasks)
	// for 2026-07-28 clients: the adapter advertises it in server/discover,
	// serves tasks/get, tasks/update and tasks/cancel from this manager, and
	// tool handlers may run as tasks (ToolFlow.RunTask). Both need the
	// server served through Handler. The adapter answers tasks/* from an
	// OnRequestInitialization hook it adds at Install: hooks the server
	// has by then (server.WithHooks) run first and may refuse the request;
	// add any that must see tasks/* requests before Install. Its
	// Options.Server should be the guard's ServerID. Nil means no tasks:
	// mcp-go answers those methods as it does without the adapter.
	Tasks *task.Manager
}

// Adapter connects a Guard to an mcp-go MCPServer: its tool and prompt
// middleware and its resource hook watch the three pausable methods, and
// AddTool, AddPrompt, AddResource and AddResourceTemplate register
// handlers that see a typed, verified Flow. Serve the server through
// Handler (or NewHTTPHandler), which gives mrtr's errors their exact
// JSON-RPC codes. An Adapter is safe for concurrent use.
type Adapter struct {
	server    *server.MCPServer
	guard     *mrtr.Guard
	principal func(context.Context) (reqstate.Principal, error)
	logger    *slog.Logger
	tasks     *task.Manager
	bodies    sync.Pool // of *bytes.Buffer, for Handler
}

// Install adds mrtr's middleware and hooks to s and returns the adapter
// to register handlers with. Call it before s serves. A nil server or
// guard panics. opts may be nil.
//
// The tool and prompt middleware refuse a result whose requestState was
// not sealed by the guard during the call (a handler that set it by hand,
// registered here or directly on s). mcp-go's own legacy bridge keeps
// serving clients older than 2026-07-28: it answers a pause through the
// session and calls the handler again with the sealed state, round after
// round; the adapter does the same for resources, which the bridge does
// not cover.
func Install(s *server.MCPServer, g *mrtr.Guard, opts *Options) *Adapter {
	if s == nil || g == nil {
		panic("mcpgo: Install needs a server and a guard")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	a := &Adapter{server: s, guard: g, principal: o.Principal, logger: adapt.Logger(o.Logger), tasks: o.Tasks}
	if a.principal == nil {
		a.principal = contextPrincipal
	}
	s.Use(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return stateGuard(a, mcpwire.MethodCallTool, next, func(r *mcp.CallToolResult) string { return r.RequestState })
	})
	server.WithPromptHandlerMiddleware(func(next server.PromptHandlerFunc) server.PromptHandlerFunc {
		return stateGuard(a, mcpwire.MethodGetPrompt, next, func(r *mcp.GetPromptResult) string { return r.RequestState })
	})(s)
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	hooks.AddAfterReadResource(a.afterReadResource)
	if a.tasks != nil {
		a.installTasks(hooks)
	}
	return a
}

// Guard returns the adapter's guard.
func (a *Adapter) Guard() *mrtr.Guard { return a.guard }

// Server returns the adapter's server.
func (a *Adapter) Server() *server.MCPServer { return a.server }

type principalKey struct{}

// WithPrincipal returns ctx carrying the verified caller p, for the
// default Options.Principal. Put it there from the middleware that
// verified the caller's credential.
func WithPrincipal(ctx context.Context, p reqstate.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller WithPrincipal put into ctx, or
// anonymous.
func PrincipalFrom(ctx context.Context) reqstate.Principal {
	p, _ := ctx.Value(principalKey{}).(reqstate.Principal)
	return p
}

func contextPrincipal(ctx context.Context) (reqstate.Principal, error) {
	return PrincipalFrom(ctx), nil
}

// exchange is what the adapter keeps of one HTTP request: Handler puts it
// into the request's context. mcp-go gives a handler no way to answer a
// JSON-RPC error of its own code and data, nor a resource handler a way
// to pause; the exchange carries both to Handler and to the resource hook.
type exchange struct {
	body []byte // the request body, for nullResponses
	// badState: the body's requestState was neither a string nor null
	// (removed by Handler, refused by the guard).
	badState bool

	nullOnce sync.Once
	null     bool

	mu      sync.Mutex
	modern  bool                        // the call was on the 2026-07-28 wire
	pending map[string]*adapt.WireError // by the message mcp-go sends
	pause   *mcp.ReadResourceResult     // a resource's pause, for the hook
	rec     adapt.Record                // the states sealed during the call
	tasks   *taskExchange               // nil until a request or a call needs it
}

// nullResponses reports whether the body's params.inputResponses is null
// or {}, reading it once, and only when asked: a call without answers.
func (x *exchange) nullResponses() bool {
	x.nullOnce.Do(func() { x.null = nullResponses(x.body) })
	return x.null
}

type exchangeKey struct{}

// exchangeContext is a context carrying an exchange, as
// context.WithValue(ctx, exchangeKey{}, x) would, in a value Handler
// allocates together with the exchange.
type exchangeContext struct {
	context.Context
	x *exchange
}

func (c *exchangeContext) Value(key any) any {
	if key == (exchangeKey{}) {
		return c.x
	}
	return c.Context.Value(key)
}

func exchangeFrom(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// callError is how a contract error leaves a handler: mcp-go sends it as
// -32603 with Error() as the message, and Handler, which has the
// exchange's record of it, rewrites that into the contract's code,
// message and data. Without Handler the client gets the -32603, whose
// message still names the error.
type callError struct{ wire *adapt.WireError }

func (e *callError) Error() string {
	var d struct{ Reason string }
	if json.Unmarshal(e.wire.Data, &d) == nil && d.Reason != "" {
		return fmt.Sprintf("%s (reason: %s)", e.wire.Message, d.Reason)
	}
	return e.wire.Message
}

// wireError maps mrtr's errors to what a handler returns to mcp-go, and
// records them for Handler; other errors pass unchanged.
func wireError(ctx context.Context, err error) error {
	w := adapt.Wire(err)
	if w == nil {
		return err
	}
	ce := &callError{wire: w}
	if x := exchangeFrom(ctx); x != nil {
		x.mu.Lock()
		if x.pending == nil {
			x.pending = map[string]*adapt.WireError{}
		}
		x.pending[ce.Error()] = w
		x.modern = x.modern || server.IsModernRequest(ctx)
		x.mu.Unlock()
	}
	return ce
}

// record returns the record of sealed states for ctx's call.
func record(ctx context.Context) *adapt.Record {
	if x := exchangeFrom(ctx); x != nil {
		return &x.rec
	}
	if r, ok := ctx.Value(recordKey{}).(*adapt.Record); ok {
		return r
	}
	return nil
}

type recordKey struct{}

// withRecord returns ctx with a record of sealed states, unless it has one.
func withRecord(ctx context.Context) (context.Context, *adapt.Record) {
	if r := record(ctx); r != nil {
		return ctx, r
	}
	rc := &recordContext{Context: ctx}
	return rc, &rc.rec
}

// recordContext is a context carrying a record of sealed states, as
// context.WithValue(ctx, recordKey{}, &rec) would, in one allocation.
type recordContext struct {
	context.Context
	rec adapt.Record
}

func (c *recordContext) Value(key any) any {
	if key == (recordKey{}) {
		return &c.rec
	}
	return c.Context.Value(key)
}

// stateGuard is the tool and prompt middleware: it refuses a result whose
// requestState nobody sealed during the call.
func stateGuard[Req any, Res any](a *Adapter, method string, next func(context.Context, Req) (*Res, error), stateOf func(*Res) string) func(context.Context, Req) (*Res, error) {
	return func(ctx context.Context, req Req) (*Res, error) {
		ctx, rec := withRecord(ctx)
		res, err := next(ctx, req)
		if err == nil && res != nil {
			err = a.checkState(ctx, rec, method, stateOf(res))
		}
		return res, err
	}
}

// checkState refuses a requestState nobody sealed during the call.
func (a *Adapter) checkState(ctx context.Context, rec *adapt.Record, method, st string) error {
	if err := rec.CheckState(st); err != nil {
		a.logger.ErrorContext(ctx, "mcpgo: a handler set requestState by hand; register it with mcpgo and pause through its Flow", "method", method)
		return wireError(ctx, err)
	}
	return nil
}

// afterReadResource turns a resource handler's pause into the
// input_required result: mcp-go's resource handlers return contents, not
// a result, so the pause travels in the exchange.
func (a *Adapter) afterReadResource(ctx context.Context, _ any, _ *mcp.ReadResourceRequest, res *mcp.ReadResourceResult) {
	x := exchangeFrom(ctx)
	if x == nil || res == nil {
		return
	}
	x.mu.Lock()
	p := x.pause
	x.pause = nil
	x.mu.Unlock()
	if p != nil {
		res.ResultType = mcp.ResultTypeInputRequired
		res.MultiRoundTripResult = p.MultiRoundTripResult
		res.Contents = []mcp.ResourceContents{}
	}
}

// errResourceNeedsHandler is a resource that pauses on a server not
// served through Handler.
var errResourceNeedsHandler = errors.New("mcpgo: a resource can pause only on a server served through mcpgo's Handler")

// capsOf reads what a client declared: on a 2026-07-28 request its _meta,
// before that what the session declared at initialize.
func capsOf(ctx context.Context, meta *mcp.Meta) mcpwire.Caps {
	if meta != nil {
		if v, ok := meta.AdditionalFields[mcpwire.MetaClientCapabilities]; ok {
			return mcpwire.CapsFromValue(v)
		}
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil {
		return typedCaps(info.ClientCapabilities)
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		c := s.GetClientCapabilities()
		return typedCaps(&c)
	}
	return mcpwire.Caps{}
}

// typedCaps reads mcp-go's typed capabilities through their JSON, so the
// reading is mcpwire's.
func typedCaps(c *mcp.ClientCapabilities) mcpwire.Caps {
	raw, err := json.Marshal(c)
	if err != nil {
		return mcpwire.Caps{}
	}
	return mcpwire.ParseCaps(raw)
}
