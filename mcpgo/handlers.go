package mcpgo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// ToolHandler handles a tool call with typed arguments In and a sealed
// continuation of type C. req carries no requestState and no
// inputResponses: the verified ones are in flow.
type ToolHandler[In, C any] func(ctx context.Context, req mcp.CallToolRequest, args In, flow *ToolFlow[C]) (*mcp.CallToolResult, error)

// PromptHandler handles prompts/get with a sealed continuation of type C.
type PromptHandler[C any] func(ctx context.Context, req mcp.GetPromptRequest, flow *PromptFlow[C]) (*mcp.GetPromptResult, error)

// ResourceHandler handles resources/read with a sealed continuation of
// type C. It returns the contents, as mcp-go's resource handlers do, or
// what flow.Ask returns to pause.
type ResourceHandler[C any] func(ctx context.Context, req mcp.ReadResourceRequest, flow *ResourceFlow[C]) ([]mcp.ResourceContents, error)

// AddTool registers a tool whose handler may pause. Arguments are bound
// to In as mcp-go's typed tool handlers bind them (a failure is an isError
// result); the arguments hash covers the request's raw arguments. A
// handler error becomes a JSON-RPC error, as in mcp-go, and releases a
// single-use token so the user can retry (unless the guard's
// ConsumeOnError is set).
func AddTool[In, C any](a *Adapter, t mcp.Tool, h ToolHandler[In, C]) {
	a.server.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args In
		if err := req.BindArguments(&args); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("failed to bind arguments: %v", err)), nil
		}
		c, err := a.newCall(ctx, mcpwire.MethodCallTool, req.Params.Name, rawArguments(req.Params), req.Params.MultiRoundTripParams, req.Params.Meta)
		if err != nil {
			return nil, err
		}
		clean := req
		clean.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{}
		return run(ctx, a, c, func(ctx context.Context, fl Flow[C]) (*mcp.CallToolResult, error) {
			return h(ctx, clean, args, &ToolFlow[C]{Flow: fl, tt: toolTask{a: a, meta: req.Params.Meta, principal: c.Principal, call: c, modern: server.IsModernRequest(ctx)}})
		}, func(r *mcp.CallToolResult) adapt.Result {
			if r == nil {
				return adapt.Result{}
			}
			return adapt.Result{State: r.RequestState, Needs: needsOf(r.InputRequests), ToolError: r.IsError}
		})
	})
}

// AddPrompt registers a prompt whose handler may pause.
func AddPrompt[C any](a *Adapter, p mcp.Prompt, h PromptHandler[C]) {
	a.server.AddPrompt(p, func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		var args json.RawMessage
		if len(req.Params.Arguments) > 0 {
			args, _ = json.Marshal(req.Params.Arguments) // map[string]string always encodes
		}
		c, err := a.newCall(ctx, mcpwire.MethodGetPrompt, req.Params.Name, args, req.Params.MultiRoundTripParams, req.Params.Meta)
		if err != nil {
			return nil, err
		}
		clean := req
		clean.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{}
		return run(ctx, a, c, func(ctx context.Context, fl Flow[C]) (*mcp.GetPromptResult, error) {
			return h(ctx, clean, &PromptFlow[C]{fl})
		}, func(r *mcp.GetPromptResult) adapt.Result {
			if r == nil {
				return adapt.Result{}
			}
			return adapt.Result{State: r.RequestState, Needs: needsOf(r.InputRequests)}
		})
	})
}

// AddResource registers a resource whose read may pause. The resource URI
// is the target a state is bound to. A pause reaches a 2026-07-28 client
// only through Handler (mcp-go's resource handlers return contents, not a
// result; the adapter's hook turns the pause into the input_required
// result); an older client is asked through its session, round after
// round, by the adapter itself (mcp-go's legacy bridge covers tools and
// prompts only).
func AddResource[C any](a *Adapter, r mcp.Resource, h ResourceHandler[C]) {
	a.server.AddResource(r, resourceHandler(a, h))
}

// AddResourceTemplate registers a resource template whose reads may pause;
// each concrete URI is its own target.
func AddResourceTemplate[C any](a *Adapter, t mcp.ResourceTemplate, h ResourceHandler[C]) {
	a.server.AddResourceTemplate(t, server.ResourceTemplateHandlerFunc(resourceHandler(a, h)))
}

func resourceHandler[C any](a *Adapter, h ResourceHandler[C]) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		for {
			c, err := a.newCall(ctx, mcpwire.MethodReadResource, req.Params.URI, nil, req.Params.MultiRoundTripParams, req.Params.Meta)
			if err != nil {
				return nil, err
			}
			clean := req
			clean.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{}
			var paused *mcp.MultiRoundTripResult
			contents, err := run(ctx, a, c, func(ctx context.Context, fl Flow[C]) ([]mcp.ResourceContents, error) {
				return h(ctx, clean, &ResourceFlow[C]{Flow: fl, paused: &paused})
			}, func([]mcp.ResourceContents) adapt.Result { return adapt.Result{} })
			if err != nil || paused == nil {
				return contents, err
			}
			if server.IsModernRequest(ctx) {
				x := exchangeFrom(ctx)
				if x == nil {
					return nil, errResourceNeedsHandler
				}
				x.mu.Lock()
				x.pause = &mcp.ReadResourceResult{MultiRoundTripResult: *paused}
				x.mu.Unlock()
				return []mcp.ResourceContents{}, nil
			}
			// An older client: ask it through the session and read again
			// with the sealed state (the guard's round cap ends a runaway).
			responses, err := a.fulfil(ctx, req.Params.URI, paused.InputRequests)
			if err != nil {
				return nil, err
			}
			req.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{InputResponses: responses, RequestState: paused.RequestState}
		}
	}
}

// call is a pausable request for the guard, with what reading its
// client's declaration needs.
type call struct {
	adapt.Call
	ctx  context.Context
	meta *mcp.Meta
}

// ReadCaps implements adapt.CapsReader.
func (c *call) ReadCaps() mcpwire.Caps { return capsOf(c.ctx, c.meta) }

// newCall reads a pausable request for the guard.
func (a *Adapter) newCall(ctx context.Context, method, target string, args json.RawMessage, mrt mcp.MultiRoundTripParams, meta *mcp.Meta) (*adapt.Call, error) {
	p, err := a.principal(ctx)
	if err != nil {
		return nil, err
	}
	cc := &call{ctx: ctx, meta: meta, Call: adapt.Call{Method: method, Target: target, Version: server.RequestProtocolVersion(ctx), Principal: p,
		Arguments: args, State: mrt.RequestState}}
	c := &cc.Call
	c.Caps = cc
	if meta != nil {
		c.Meta = meta.AdditionalFields // for the guard's Observer (trace context)
	}
	x := exchangeFrom(ctx)
	if x != nil {
		c.BadState = x.badState
	}
	if mrt.InputResponses != nil {
		c.Responses = make(map[string]any, len(mrt.InputResponses))
		for k, v := range mrt.InputResponses {
			c.Responses[k] = v
		}
	} else if x != nil {
		c.NullResponses = x.nullResponses() // mcp-go decodes null as absent
	}
	return c, nil
}

// rawArguments returns a tool call's arguments as sent (mcp-go keeps the
// raw JSON, so a large integer is hashed exactly), or nil when absent.
func rawArguments(p mcp.CallToolParams) json.RawMessage {
	if len(p.RawArguments) > 0 {
		return p.RawArguments
	}
	if p.Arguments == nil {
		return nil
	}
	raw, err := json.Marshal(p.Arguments)
	if err != nil {
		return nil
	}
	return raw
}

// run is the common path of every handler: adapt.Run (the guard's checks,
// the handler, the checks of its result, settling the single-use
// reservation), with errors mapped for Handler.
func run[R, C any](ctx context.Context, a *Adapter, c *adapt.Call, h func(context.Context, Flow[C]) (R, error), inspect func(R) adapt.Result) (R, error) {
	res, err := adapt.Run(ctx, a.guard, c, record(ctx), a.logger,
		func(ctx context.Context, core *adapt.Flow[C]) (R, error) {
			return h(ctx, Flow[C]{core: core}) // by value: the handler's ToolFlow (or other) holds the one copy
		}, inspect)
	if err != nil {
		var zero R
		return zero, wireError(ctx, err)
	}
	return res, nil
}
