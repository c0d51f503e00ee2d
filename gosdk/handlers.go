package gosdk

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
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
		c := newCall(req, mcpwire.MethodCallTool, p.Name, req.ProtocolVersion(), p.Arguments, p.RequestState, p.InputResponses, req.ClientCapabilities, p.Meta)
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
		c := newCall(req, mcpwire.MethodGetPrompt, params.Name, req.ProtocolVersion(), args, params.RequestState, params.InputResponses, req.ClientCapabilities, params.Meta)
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
		c := newCall(req, mcpwire.MethodReadResource, params.URI, req.ProtocolVersion(), nil, params.RequestState, params.InputResponses, req.ClientCapabilities, params.Meta)
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

// run is the common path of every handler: the caller, then adapt.Run
// (the guard's checks, the handler, the checks of its result, settling
// the single-use reservation), with errors mapped to go-sdk's.
func run[R pausable, C any](ctx context.Context, a *Adapter, c *call, h func(context.Context, *Flow[C]) (R, error)) (R, error) {
	var zero R
	if err := a.principalOf(ctx, c); err != nil {
		return zero, err
	}
	c.BadState = badState(ctx)
	legacy := legacySession(c.req)
	if legacy {
		c.Meta = withClientInfo(c.Meta, c.req)
	}
	res, err := adapt.Run(ctx, a.guard, &c.Call, recordFrom(ctx), a.logger,
		func(ctx context.Context, core *adapt.Flow[C]) (R, error) {
			return h(ctx, &Flow[C]{core: core, call: c, legacy: legacy})
		}, inspect[R])
	if err != nil {
		return zero, wireError(err)
	}
	return res, nil
}

// inspect reads what adapt.Run checks in a result.
func inspect[R pausable](res R) adapt.Result {
	reqs, st := pauseOf(res)
	r := adapt.Result{State: st, Needs: needsOf(reqs)}
	if t, ok := any(res).(*mcp.CallToolResult); ok && t != nil {
		r.ToolError = t.IsError
	}
	return r
}
