package gosdk

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// legacySession reports whether req comes from a client older than
// 2026-07-28, which go-sdk serves through its bridge: the server fulfils
// input requests itself with real elicitation, sampling and roots
// requests on the client's session.
func legacySession(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion < adapt.ModernVersion
}

// withClientInfo returns meta with the clientInfo a 2025-11-25 client
// sent at initialize, for the guard's Auditor (a 2026-07-28 client sends
// it in every request's _meta): a copy, so the handler's request is not
// changed. meta itself when there is none or meta has its own.
func withClientInfo(meta mcp.Meta, req mcp.Request) mcp.Meta {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return meta
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ClientInfo == nil {
		return meta
	}
	if _, has := meta[mcpwire.MetaClientInfo]; has {
		return meta
	}
	m := make(mcp.Meta, len(meta)+1)
	maps.Copy(m, meta)
	m[mcpwire.MetaClientInfo] = map[string]any{"name": ip.ClientInfo.Name, "version": ip.ClientInfo.Version}
	return m
}

// legacyRounds completes a flow for a legacy client. go-sdk's bridge
// answers one pause and re-invokes the handler once; when the handler
// pauses again, the result would reach a client that cannot read it. This
// loop keeps fulfilling the input requests through the session and
// resuming, with the same sealed state a modern client would echo, until
// the flow completes (the guard's round cap ends a runaway flow).
func (a *Adapter) legacyRounds(ctx context.Context, method string, req mcp.Request, res mcp.Result, next mcp.MethodHandler) (mcp.Result, error) {
	ss := req.GetSession().(*mcp.ServerSession)
	for {
		reqs, state := pauseOf(res)
		if reqs == nil {
			return res, nil
		}
		if len(reqs) == 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is busy, retry later"}
		}
		responses := make(mcp.InputResponseMap, len(reqs))
		for _, k := range slices.Sorted(maps.Keys(reqs)) {
			r, err := fulfil(ctx, ss, reqs[k])
			if err != nil {
				a.logger.WarnContext(ctx, "gosdk: legacy client did not answer an input request", "method", method, "key", k, "error", err)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("input request %q was not answered", k)}
			}
			responses[k] = r
		}
		var err error
		req = withAnswers(req, responses, state)
		if res, err = next(ctx, method, req); err != nil {
			return res, err
		}
	}
}

// pauseOf returns the input requests and requestState of a pausable
// result (nil and "" for any other).
func pauseOf(res any) (mcp.InputRequestMap, string) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.GetPromptResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			return r.InputRequests, r.RequestState
		}
	}
	return nil, ""
}

// fulfil asks a legacy client one input request through its session.
func fulfil(ctx context.Context, ss *mcp.ServerSession, r mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := r.(type) {
	case *mcp.ElicitParams:
		return ss.Elicit(ctx, p)
	case *mcp.CreateMessageWithToolsParams:
		return ss.CreateMessageWithTools(ctx, p)
	case *mcp.CreateMessageParams:
		msgs := make([]*mcp.SamplingMessageV2, len(p.Messages))
		for i, m := range p.Messages {
			msgs[i] = &mcp.SamplingMessageV2{Role: m.Role, Content: []mcp.Content{m.Content}}
		}
		return ss.CreateMessageWithTools(ctx, &mcp.CreateMessageWithToolsParams{
			Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens, Messages: msgs, Metadata: p.Metadata,
			ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences, SystemPrompt: p.SystemPrompt, Temperature: p.Temperature,
		})
	case *mcp.ListRootsParams:
		return ss.ListRoots(ctx, p)
	}
	return nil, fmt.Errorf("unknown input request type %T", r)
}

// withAnswers returns a copy of req retrying with responses and state.
func withAnswers(req mcp.Request, responses mcp.InputResponseMap, state string) mcp.Request {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		p := *r.Params
		p.InputResponses, p.RequestState = responses, state
		return &mcp.CallToolRequest{Session: r.Session, Params: &p, Extra: r.Extra}
	case *mcp.GetPromptRequest:
		p := *r.Params
		p.InputResponses, p.RequestState = responses, state
		return &mcp.GetPromptRequest{Session: r.Session, Params: &p, Extra: r.Extra}
	case *mcp.ReadResourceRequest:
		p := *r.Params
		p.InputResponses, p.RequestState = responses, state
		return &mcp.ReadResourceRequest{Session: r.Session, Params: &p, Extra: r.Extra}
	}
	return req
}
