package gosdk

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
)

// Flow is a handler's view of one call of a multi-round flow, with a
// continuation of type C: whether the call resumes a pause, the verified
// continuation, the answers to exactly the questions the sealed round
// asked, and what this request's client can be asked. Handlers get it as
// a ToolFlow, PromptFlow or ResourceFlow, whose Ask pauses.
//
// A Flow belongs to one call; it is safe for concurrent use.
type Flow[C any] struct {
	core   *adapt.Flow[C]
	call   *call
	legacy bool // the client predates 2026-07-28 (go-sdk's bridge answers)
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
// Go type. For a tool it is the text of an isError result, as any handler
// error.
var ErrStaleContinuation = adapt.ErrStaleContinuation

// Elicited returns the answer to elicitation key, only if the sealed round
// asked for key and the answer is an elicitation result. A missing or
// mistyped answer is not an error: ask again.
func (f *Flow[C]) Elicited(key string) (*mcp.ElicitResult, bool) {
	return adapt.Typed[*mcp.ElicitResult](adapt.Answer(f.core, key))
}

// Sampled returns the answer to sampling request key, as Elicited does.
func (f *Flow[C]) Sampled(key string) (*mcp.CreateMessageWithToolsResult, bool) {
	if r, ok := adapt.Typed[*mcp.CreateMessageWithToolsResult](adapt.Answer(f.core, key)); ok {
		return r, true
	}
	// A client-side or in-memory path may deliver the tool-less type.
	if r, ok := adapt.Typed[*mcp.CreateMessageResult](adapt.Answer(f.core, key)); ok {
		return &mcp.CreateMessageWithToolsResult{Meta: r.Meta, Content: []mcp.Content{r.Content}, Model: r.Model, Role: r.Role, StopReason: r.StopReason}, true
	}
	return nil, false
}

// Roots returns the answer to roots request key, as Elicited does.
func (f *Flow[C]) Roots(key string) (*mcp.ListRootsResult, bool) {
	return adapt.Typed[*mcp.ListRootsResult](adapt.Answer(f.core, key))
}

// Unverified returns an answer sent without any requestState: nobody
// asked for it in a sealed round. A stateless handler may use it (the
// spec's ephemeral pattern); a handler that relies on its continuation
// should ask properly first.
func (f *Flow[C]) Unverified(key string) (mcp.InputResponse, bool) {
	v, ok := adapt.Unverified(f.core, key)
	if !ok {
		return nil, false
	}
	r, ok := v.(mcp.InputResponse)
	return r, ok
}

// Capabilities returns the client capabilities declared on this request
// (never nil), as go-sdk decodes them.
func (f *Flow[C]) Capabilities() *mcp.ClientCapabilities {
	if c := f.call.fullCaps(); c != nil {
		return c
	}
	return &mcp.ClientCapabilities{}
}

// Supports reports whether this request's client declared the capability
// input request r needs. Ask refuses requests it does not support.
func (f *Flow[C]) Supports(r mcp.InputRequest) bool {
	return adapt.Declared(f.core).Lacks(needOf(r)) == ""
}

// pause seals the next round after the capability gate.
func (f *Flow[C]) pause(state C, reqs mcp.InputRequestMap) (string, error) {
	tok, err := adapt.Pause(f.core, state, needsOf(reqs))
	if err != nil {
		return "", wireError(err)
	}
	return tok, nil
}

// ToolFlow is the Flow of a tool call.
type ToolFlow[C any] struct{ Flow[C] }

// Ask pauses the tool: it seals state as the continuation of the next
// round and returns the input_required result carrying reqs, ready to
// return from the handler. It fails with a -32021 error when this client
// cannot answer one of reqs, and with rounds_exceeded when the flow has
// paused MaxRounds times.
func (f *ToolFlow[C]) Ask(state C, reqs mcp.InputRequestMap) (*mcp.CallToolResult, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: tok}, nil
}

// PromptFlow is the Flow of a prompts/get call.
type PromptFlow[C any] struct{ Flow[C] }

// Ask pauses the prompt, as ToolFlow.Ask does.
func (f *PromptFlow[C]) Ask(state C, reqs mcp.InputRequestMap) (*mcp.GetPromptResult, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{InputRequests: reqs, RequestState: tok}, nil
}

// ResourceFlow is the Flow of a resources/read call.
type ResourceFlow[C any] struct{ Flow[C] }

// Ask pauses the read, as ToolFlow.Ask does.
func (f *ResourceFlow[C]) Ask(state C, reqs mcp.InputRequestMap) (*mcp.ReadResourceResult, error) {
	tok, err := f.pause(state, reqs)
	if err != nil {
		return nil, err
	}
	res := &mcp.ReadResourceResult{InputRequests: reqs, RequestState: tok}
	if f.legacy {
		// go-sdk refuses a read result without contents before its bridge
		// can answer the input requests of a legacy client; an empty list
		// gets through and carries nothing.
		res.Contents = []*mcp.ResourceContents{}
	}
	return res, nil
}
