package mcpgo

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// fulfil asks a client older than 2026-07-28 the input requests of a
// resource's pause through its session, as mcp-go's legacy bridge does
// for tools and prompts.
func (a *Adapter) fulfil(ctx context.Context, target string, reqs mcp.InputRequests) (mcp.InputResponses, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("mcpgo: the server is busy, retry later")
	}
	responses := make(mcp.InputResponses, len(reqs))
	for _, k := range slices.Sorted(maps.Keys(reqs)) {
		r, err := a.fulfilOne(ctx, reqs[k])
		if err != nil {
			a.logger.WarnContext(ctx, "mcpgo: legacy client did not answer an input request", "target", mcpwire.Shown(target), "key", k, "error", err)
			return nil, fmt.Errorf("input request %q was not answered", k)
		}
		responses[k] = r
	}
	return responses, nil
}

func (a *Adapter) fulfilOne(ctx context.Context, r mcp.InputRequest) (mcp.InputResponse, error) {
	switch {
	case r.Elicitation != nil:
		res, err := a.server.RequestElicitation(ctx, mcp.ElicitationRequest{Params: *r.Elicitation})
		if err != nil || res == nil {
			return mcp.InputResponse{}, fmt.Errorf("elicitation: %w", err)
		}
		return mcp.NewElicitationInputResponse(*res), nil
	case r.Sampling != nil:
		res, err := a.server.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: *r.Sampling})
		if err != nil || res == nil {
			return mcp.InputResponse{}, fmt.Errorf("sampling: %w", err)
		}
		return mcp.NewSamplingInputResponse(*res), nil
	case r.Roots != nil:
		res, err := a.server.RequestRoots(ctx, mcp.ListRootsRequest{})
		if err != nil || res == nil {
			return mcp.InputResponse{}, fmt.Errorf("roots: %w", err)
		}
		return mcp.NewRootsInputResponse(*res), nil
	}
	return mcp.InputResponse{}, fmt.Errorf("unknown input request method %q", r.Method)
}
