package mcpgo

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// Flow is a handler's view of one call of a multi-round flow, with a
// continuation of type C: whether the call resumes a pause (Resumed), the
// round, the flow id, the verified continuation (State), the answers to
// exactly the questions the sealed round asked, and what this request's
// client can be asked. Handlers get it as a ToolFlow, PromptFlow or
// ResourceFlow, whose Ask pauses.
//
// A Flow belongs to one call; it is safe for concurrent use.
type Flow[C any] struct {
	core *adapt.Flow[C]
}

// Resumed reports whether the call carried a verified requestState: false
// on a first call.
func (f *Flow[C]) Resumed() bool { return f.core.Resumed() }

// Round is the number of pauses so far: 0 on a first call.
func (f *Flow[C]) Round() int { return f.core.Round() }

// ID is the flow id, constant across the rounds of one flow: an
// idempotency key for side effects. It is empty on a first call until the
// flow pauses.
func (f *Flow[C]) ID() string { return f.core.ID() }

// Asked returns the input request keys the resumed round asked.
func (f *Flow[C]) Asked() []string { return f.core.Asked() }

// State returns the verified continuation sealed by the previous pause,
// and false on a first call (or when that pause sealed none).
func (f *Flow[C]) State() (C, bool) { return f.core.State() }

// ErrStaleContinuation is what the client gets when a verified
// continuation no longer decodes into the handler's continuation type (a
// deploy changed the type while tokens were live): a fixed message, never
// the sealed value; the token is released. The adapter's Logger names the
// Go type.
var ErrStaleContinuation = adapt.ErrStaleContinuation

// response returns the verified answer under key, resolved for method.
func (f *Flow[C]) response(key string, method mcp.MCPMethod) (mcp.InputResponse, bool) {
	r, ok := adapt.Typed[mcp.InputResponse](adapt.Answer(f.core, key))
	if !ok || r.DecodeFor(method) != nil {
		return mcp.InputResponse{}, false
	}
	return r, true
}

// Elicited returns the answer to elicitation key, only if the sealed round
// asked for key and the answer is an elicitation result. A missing or
// mistyped answer is not an error: ask again.
func (f *Flow[C]) Elicited(key string) (*mcp.ElicitationResult, bool) {
	r, ok := f.response(key, mcp.MethodElicitationCreate)
	return r.Elicitation, ok && r.Elicitation != nil
}

// Sampled returns the answer to sampling request key, as Elicited does.
func (f *Flow[C]) Sampled(key string) (*mcp.CreateMessageResult, bool) {
	r, ok := f.response(key, mcp.MethodSamplingCreateMessage)
	return r.Sampling, ok && r.Sampling != nil
}

// Roots returns the answer to roots request key, as Elicited does.
func (f *Flow[C]) Roots(key string) (*mcp.ListRootsResult, bool) {
	r, ok := f.response(key, mcp.MethodListRoots)
	return r.Roots, ok && r.Roots != nil
}

// Unverified returns an answer sent without any requestState: nobody
// asked for it in a sealed round. A stateless handler may use it (the
// spec's ephemeral pattern); a handler that relies on its continuation
// should ask properly first. Resolve it with DecodeFor.
func (f *Flow[C]) Unverified(key string) (mcp.InputResponse, bool) {
	return adapt.Typed[mcp.InputResponse](adapt.Unverified(f.core, key))
}

// Supports reports whether this request's client declared the capability
// input request r needs. Ask refuses requests it does not support.
func (f *Flow[C]) Supports(r mcp.InputRequest) bool {
	return adapt.Declared(f.core).Lacks(needOf(r)) == ""
}

// pause seals the next round after the capability gate. Its errors are
// mapped to the wire when the handler returns them.
func (f *Flow[C]) pause(state C, reqs mcp.InputRequests) (string, error) {
	return adapt.Pause(f.core, state, needsOf(reqs))
}

// needOf is what the capability gate needs to know of input request r.
func needOf(r mcp.InputRequest) mcpwire.Need {
	n := mcpwire.Need{Method: string(r.Method)}
	switch {
	case r.Elicitation != nil:
		n.URLMode = r.Elicitation.Mode == mcp.ElicitationModeURL || (r.Elicitation.Mode == "" && r.Elicitation.URL != "")
	case r.Sampling != nil:
		n.Tools = len(r.Sampling.Tools) > 0
	}
	return n
}

// needsOf is needOf for every request of reqs; nil for none.
func needsOf(reqs mcp.InputRequests) adapt.Needs { return adapt.NeedsOf(reqs, needOf) }

// ToolFlow is the Flow of a tool call.
type ToolFlow[C any] struct {
	Flow[C]
	tt toolTask // what RunTask needs
}

// Ask pauses the tool: it seals state as the continuation of the next
// round and returns the input_required result carrying reqs, ready to
// return from the handler. It fails with a -32021 error when this client
// cannot answer one of reqs, and with rounds_exceeded when the flow has
// paused MaxRounds times: return that error from the handler.
func (f *ToolFlow[C]) Ask(state C, reqs mcp.InputRequests) (*mcp.CallToolResult, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: tok}}, nil
}

// PromptFlow is the Flow of a prompts/get call.
type PromptFlow[C any] struct{ Flow[C] }

// Ask pauses the prompt, as ToolFlow.Ask does.
func (f *PromptFlow[C]) Ask(state C, reqs mcp.InputRequests) (*mcp.GetPromptResult, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
		MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: tok}}, nil
}

// ResourceFlow is the Flow of a resources/read call.
type ResourceFlow[C any] struct {
	Flow[C]
	paused **mcp.MultiRoundTripResult
}

// Ask pauses the read, as ToolFlow.Ask does: return what it returns from
// the handler, and the adapter answers with the input_required result.
func (f *ResourceFlow[C]) Ask(state C, reqs mcp.InputRequests) ([]mcp.ResourceContents, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	if f.paused == nil {
		return nil, fmt.Errorf("mcpgo: ResourceFlow.Ask outside a handler registered with mcpgo")
	}
	*f.paused = &mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: tok}
	return []mcp.ResourceContents{}, nil
}
