package gosdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/reqstate"
)

// The three methods that may pause with input_required.
const (
	methodCallTool     = "tools/call"
	methodGetPrompt    = "prompts/get"
	methodReadResource = "resources/read"
)

// modernVersion is the first protocol version with Multi Round-Trip
// Requests; older clients go through go-sdk's bridge.
const modernVersion = "2026-07-28"

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
	}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
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

// callRecord lists the states sealed during one call, so the middleware
// can tell a sealed requestState from one a handler wrote by hand.
type callRecord struct {
	mu     sync.Mutex
	sealed []string
	logger *slog.Logger // the adapter's
}

func (r *callRecord) add(tok string) {
	r.mu.Lock()
	r.sealed = append(r.sealed, tok)
	r.mu.Unlock()
}

func (r *callRecord) has(tok string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.sealed, tok)
}

type recordKey struct{}

func recordFrom(ctx context.Context) *callRecord {
	r, _ := ctx.Value(recordKey{}).(*callRecord)
	return r
}

func (a *Adapter) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodCallTool, methodGetPrompt, methodReadResource:
		default:
			return next(ctx, method, req)
		}
		rec := recordFrom(ctx)
		if rec == nil {
			rec = &callRecord{logger: a.logger}
			ctx = context.WithValue(ctx, recordKey{}, rec)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if st := requestStateOf(res); st != "" && !rec.has(st) {
			a.logger.ErrorContext(ctx, "gosdk: a handler set requestState by hand; register it with gosdk and pause through its Flow", "method", method)
			return nil, wireError(mrtr.ErrHandlerState)
		}
		if legacySession(req) {
			return a.legacyRounds(ctx, method, req, res, next)
		}
		return res, nil
	}
}

// requestStateOf returns the requestState of a pausable result.
func requestStateOf(res mcp.Result) string {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			return r.RequestState
		}
	case *mcp.GetPromptResult:
		if r != nil {
			return r.RequestState
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			return r.RequestState
		}
	}
	return ""
}

// wireError turns mrtr's errors into the JSON-RPC errors of the error
// contract; other errors pass unchanged. go-sdk sends a *jsonrpc.Error
// as is, with its data, only when it is returned unwrapped.
func wireError(err error) error {
	var re *mrtr.RejectError
	var je *jsonrpc.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		data, _ := json.Marshal(map[string]string{"reason": string(re.Reason)})
		return &jsonrpc.Error{Code: mrtr.CodeInvalidParams, Message: mrtr.RejectMessage, Data: data}
	case errors.Is(err, mrtr.ErrStoreUnavailable):
		return &jsonrpc.Error{Code: mrtr.CodeInternalError, Message: "internal error"}
	case errors.Is(err, mrtr.ErrInvalidArguments):
		return &jsonrpc.Error{Code: mrtr.CodeInvalidParams, Message: argumentsMessage(err)}
	case errors.Is(err, mrtr.ErrHandlerState):
		return &jsonrpc.Error{Code: mrtr.CodeInternalError, Message: "server bug: a handler set requestState without sealing it"}
	case errors.As(err, &je):
		return je
	}
	return err
}

// errNoSubjectWire is what the client of ErrNoSubject gets.
var errNoSubjectWire = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "unauthorized: the credential names no subject"}

// argumentsMessage names the rule that arguments the hash refuses broke,
// never their content.
func argumentsMessage(err error) string {
	if errors.Is(err, reqstate.ErrInexactNumber) {
		return "invalid params: arguments hold a number with more precision than an IEEE 754 double carries " +
			"(I-JSON, RFC 7493); send large integers and exact decimals as strings"
	}
	return fmt.Sprintf("invalid params: arguments are not I-JSON (RFC 7493): no duplicate member names, "+
		"no lone surrogates or invalid UTF-8, at most %d levels of nesting", reqstate.MaxJSONDepth)
}

// errNullResponses answers inputResponses that are null or an empty
// object: a retry must carry the answers it retries with.
var errNullResponses = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: inputResponses must be an object of answers"}

// call is what the three handler kinds share: the request's identity for
// the guard.
type call struct {
	req       mcp.Request
	method    string
	target    string
	version   string
	args      json.RawMessage
	state     string
	responses mcp.InputResponseMap
	meta      mcp.Meta // params._meta, for the guard's Observer (trace context)
	// fullCaps is go-sdk's accessor for the client's capabilities; it is
	// costly (a JSON round trip), so it runs only when a handler asks.
	fullCaps func() *mcp.ClientCapabilities

	capsOnce sync.Once
	caps     capSet
}

// declared returns what the client declared, computed once.
func (c *call) declared() capSet {
	c.capsOnce.Do(func() { c.caps = declaredCapabilities(c.req, c.fullCaps) })
	return c.caps
}

// begin runs the guard's checks for a call.
func (a *Adapter) begin(ctx context.Context, c *call) (*mrtr.Flow, error) {
	if c.responses != nil && len(c.responses) == 0 {
		return nil, errNullResponses
	}
	p, err := a.principal(ctx, c.req)
	if errors.Is(err, ErrNoSubject) {
		a.logger.WarnContext(ctx, "gosdk: refused a call whose verified credential names no subject", "method", c.method)
		return nil, errNoSubjectWire
	}
	if err != nil {
		return nil, err
	}
	r := &mrtr.Request{
		Method:          c.method,
		ProtocolVersion: c.version,
		Target:          c.target,
		Principal:       p,
		Arguments:       c.args,
		RequestState:    c.state,
		Meta:            c.meta,
	}
	if len(c.responses) > 0 {
		r.InputResponses = make(map[string]any, len(c.responses))
		for k, v := range c.responses {
			r.InputResponses[k] = v
		}
	}
	f, err := a.guard.Begin(ctx, r)
	if err != nil {
		return nil, wireError(err)
	}
	return f, nil
}
