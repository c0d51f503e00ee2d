package gosdk

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
)

// ToolHandler handles a tool call with typed arguments In and a sealed
// continuation of type C. req carries no requestState and no
// inputResponses: the verified ones are in flow.
type ToolHandler[In, C any] func(ctx context.Context, req *mcp.CallToolRequest, args In, flow *ToolFlow[C]) (*mcp.CallToolResult, error)

// PromptHandler handles prompts/get with a sealed continuation of type C.
type PromptHandler[C any] func(ctx context.Context, req *mcp.GetPromptRequest, flow *PromptFlow[C]) (*mcp.GetPromptResult, error)

// ResourceHandler handles resources/read with a sealed continuation of
// type C.
type ResourceHandler[C any] func(ctx context.Context, req *mcp.ReadResourceRequest, flow *ResourceFlow[C]) (*mcp.ReadResourceResult, error)

// AddTool registers a tool whose handler may pause. Arguments are decoded
// and validated by go-sdk (mcp.AddTool), so t's input schema may be left
// for it to infer from In. A handler error that is not a JSON-RPC error
// becomes an isError tool result, as in go-sdk; either way a single-use
// token is released so the user can retry (unless the guard's
// ConsumeOnError is set).
func AddTool[In, C any](a *Adapter, t *mcp.Tool, h ToolHandler[In, C]) {
	mcp.AddTool(a.server, t, func(ctx context.Context, req *mcp.CallToolRequest, args In) (*mcp.CallToolResult, any, error) {
		p := *req.Params
		c := &call{req: req, method: methodCallTool, target: p.Name, version: req.ProtocolVersion(),
			args: p.Arguments, state: p.RequestState, responses: p.InputResponses, fullCaps: req.ClientCapabilities, meta: p.Meta}
		p.RequestState, p.InputResponses = "", nil
		clean := &mcp.CallToolRequest{Session: req.Session, Params: &p, Extra: req.Extra}
		res, err := run(ctx, a, c, func(ctx context.Context, fl *Flow[C]) (*mcp.CallToolResult, error) {
			return h(ctx, clean, args, &ToolFlow[C]{*fl})
		})
		return res, nil, err
	})
}

// AddPrompt registers a prompt whose handler may pause.
func AddPrompt[C any](a *Adapter, p *mcp.Prompt, h PromptHandler[C]) {
	a.server.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		params := *req.Params
		var args json.RawMessage
		if len(params.Arguments) > 0 {
			args, _ = json.Marshal(params.Arguments) // map[string]string always encodes
		}
		c := &call{req: req, method: methodGetPrompt, target: params.Name, version: req.ProtocolVersion(),
			args: args, state: params.RequestState, responses: params.InputResponses, fullCaps: req.ClientCapabilities, meta: params.Meta}
		params.RequestState, params.InputResponses = "", nil
		clean := &mcp.GetPromptRequest{Session: req.Session, Params: &params, Extra: req.Extra}
		return run(ctx, a, c, func(ctx context.Context, fl *Flow[C]) (*mcp.GetPromptResult, error) {
			return h(ctx, clean, &PromptFlow[C]{*fl})
		})
	})
}

// AddResource registers a resource whose read may pause. The resource URI
// is the target a state is bound to.
func AddResource[C any](a *Adapter, r *mcp.Resource, h ResourceHandler[C]) {
	a.server.AddResource(r, resourceHandler(a, h))
}

// AddResourceTemplate registers a resource template whose reads may pause;
// each concrete URI is its own target.
func AddResourceTemplate[C any](a *Adapter, t *mcp.ResourceTemplate, h ResourceHandler[C]) {
	a.server.AddResourceTemplate(t, resourceHandler(a, h))
}

func resourceHandler[C any](a *Adapter, h ResourceHandler[C]) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		params := *req.Params
		c := &call{req: req, method: methodReadResource, target: params.URI, version: req.ProtocolVersion(),
			state: params.RequestState, responses: params.InputResponses, fullCaps: req.ClientCapabilities, meta: params.Meta}
		params.RequestState, params.InputResponses = "", nil
		clean := &mcp.ReadResourceRequest{Session: req.Session, Params: &params, Extra: req.Extra}
		return run(ctx, a, c, func(ctx context.Context, fl *Flow[C]) (*mcp.ReadResourceResult, error) {
			return h(ctx, clean, &ResourceFlow[C]{*fl})
		})
	}
}

// pausable is what the three result types share.
type pausable interface {
	*mcp.CallToolResult | *mcp.GetPromptResult | *mcp.ReadResourceResult
}

// run is the common path of every handler: the guard's checks, the
// handler, the capability gate on what it asks, and settling the
// single-use reservation.
//
// Settling can fail (the store times out): Flow.End then logs the error
// and run still answers with what the handler returned, its result or its
// error. That is safe because a reservation holds until the token expires
// unless it is released: a commit that failed after the handler succeeded
// leaves the token reserved, so it never runs again, and the client gets
// the result it is owed instead of an error that would invite a retry the
// guard must refuse. A release that failed after a handler error only
// costs the user the token (a retry is refused as replayed).
func run[R pausable, C any](ctx context.Context, a *Adapter, c *call, h func(context.Context, *Flow[C]) (R, error)) (R, error) {
	var zero R
	f, err := a.begin(ctx, c)
	if err != nil {
		return zero, err
	}
	fl, err := newFlow[C](ctx, f, c)
	if err != nil {
		_ = f.End(ctx, err) // logged by End; see above
		return zero, wireError(err)
	}
	res, err := h(ctx, fl)
	if err == nil {
		err = a.checkResult(c, f, res)
	}
	_ = f.End(ctx, err) // logged by End; see above
	if err != nil {
		return zero, wireError(err)
	}
	return res, nil
}

// checkResult refuses a result with a requestState the flow did not seal,
// or with input requests this client cannot answer.
func (a *Adapter) checkResult(c *call, f interface{ Paused() (string, bool) }, res any) error {
	var st string
	var reqs mcp.InputRequestMap
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			st, reqs = r.RequestState, r.InputRequests
		}
	case *mcp.GetPromptResult:
		if r != nil {
			st, reqs = r.RequestState, r.InputRequests
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			st, reqs = r.RequestState, r.InputRequests
		}
	}
	if st != "" {
		if tok, ok := f.Paused(); !ok || tok != st {
			return mrtr.ErrHandlerState
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	return missingCapabilities(c.declared(), reqs)
}
