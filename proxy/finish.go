package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// finish is finishMessage, with the answer reported to the guard's
// Auditor and Observer before it is sent (mrtr.Flow.Finish): an answer
// the audit trail could not record is replaced by a -32603 error.
func (h *Handler) finish(ctx context.Context, c *call, b []byte, msg object) (out []byte, status int, release error) {
	out, status, release = h.finishMessage(ctx, c, b, msg)
	if err := h.report(ctx, c, out); err != nil {
		return guardErrorBody(c.req.id, err), http.StatusOK, release
	}
	return out, status, release
}

// report tells the guard how the call was answered with out, unless it
// paused (its pause was recorded when it was sealed).
func (h *Handler) report(ctx context.Context, c *call, out []byte) error {
	if !h.watched {
		return nil
	}
	if _, paused := c.flow.Paused(); paused {
		return nil
	}
	outcome, code := answerOutcome(out)
	return c.flow.Finish(ctx, outcome, code)
}

// answerOutcome reads how a JSON-RPC response answered: its error's
// code, or a result with isError (tool_error), or a result.
func answerOutcome(out []byte) (mrtr.CallOutcome, int) {
	t := mcpwire.TrimSpace(out)
	if e, ok := mcpwire.Member(t, "error"); ok {
		code := mrtr.CodeInternalError
		if c, ok := mcpwire.Member(mcpwire.TrimSpace(e), "code"); ok {
			if n, err := strconv.Atoi(string(mcpwire.TrimSpace(c))); err == nil {
				code = n
			}
		}
		return mrtr.OutcomeError, code
	}
	if r, ok := mcpwire.Member(t, "result"); ok {
		if e, ok := mcpwire.Member(mcpwire.TrimSpace(r), "isError"); ok && string(mcpwire.TrimSpace(e)) == "true" {
			return mrtr.OutcomeToolError, 0
		}
	}
	return mrtr.OutcomeComplete, 0
}

// finishMessage turns the upstream's final message for c into the client's. It
// returns the message, an HTTP status to use instead of the upstream's (0
// keeps it) and what settles the reservation (see forward): errUpstreamRPC
// for a JSON-RPC error, which releases it; nil for everything else, since
// the upstream has run the call, whether its answer is passed on, sealed or
// refused.
//
// msg is b already parsed, or nil: every message is parsed once.
func (h *Handler) finishMessage(ctx context.Context, c *call, b []byte, msg object) (out []byte, status int, release error) {
	id := c.req.id
	resp, err := parseResponse(b, msg)
	if t := mcpwire.TrimSpace(b); err != nil && len(t) > 0 && t[0] == '[' {
		err = errForeign // a batch: no response of this request's
		c.refused = true
	}
	if err != nil {
		c.x.discard() // not a message this request's, whatever it is
		if c.refused {
			h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", err)
			return errorBody(id, mrtr.CodeInternalError, msgForeign, nil), http.StatusOK, nil
		}
		h.log.ErrorContext(ctx, "proxy: upstream answered garbage", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", err)
		return errorBody(id, mrtr.CodeInternalError, "upstream answered an invalid message", nil), http.StatusOK, nil
	}
	// The id is checked before anything of the answer is used, an
	// input_required sealed above all: a response of another request's
	// would be sealed under this caller's binding.
	switch c.x.judge(resp.msg) {
	case nullError:
		c.x.discard()
		h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", errNullID)
		return errorBody(id, mrtr.CodeInternalError, msgNullID, nil), http.StatusOK, nil
	case foreign:
		c.refused = true
		c.x.discard()
		h.log.ErrorContext(ctx, "proxy: upstream failed", "method", c.req.method, "target", mcpwire.Shown(c.target), "step", "read the upstream response", "sent", true, "error", errForeign)
		return errorBody(id, mrtr.CodeInternalError, msgForeign, nil), http.StatusOK, nil
	}
	b, ok := c.x.restoreIDs(b, resp.msg, ours)
	if !ok {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	resp.msg["id"] = id
	return h.finishResponse(ctx, c, b, resp)
}

// finishResponse is finishMessage for the request's own response, its id
// already the caller's.
func (h *Handler) finishResponse(ctx context.Context, c *call, b []byte, resp *rpcResponse) (out []byte, status int, release error) {
	id := c.req.id
	var err error
	if resp.result == nil {
		return b, 0, errUpstreamRPC
	}
	if isTaskResult(resp.result) {
		// A CreateTaskResult: the caller sees the task id sealed to it.
		return h.sealCreated(ctx, c, b, resp)
	}
	if !resp.inputRequired() {
		return b, 0, nil
	}
	garbage := func(why string) ([]byte, int, error) {
		h.log.ErrorContext(ctx, "proxy: upstream answered an invalid input_required result", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", why)
		return errorBody(id, mrtr.CodeInternalError, "upstream answered an invalid message", nil), http.StatusOK, nil
	}
	var reqs object
	if resp.result.Has("inputRequests") {
		var ok bool
		if reqs, ok = resp.result.Object("inputRequests"); !ok {
			return garbage("inputRequests is not an object")
		}
	}
	caps := mcpwire.CapsFromParsedMeta(c.req.params["_meta"]) // params were validated with the request, reqs with the message
	if missing := mcpwire.MissingParsed(caps, reqs); len(missing) > 0 {
		if slices.Contains(missing, mcpwire.Unvettable) {
			return garbage("an input request is not a known {method, params} object")
		}
		h.log.InfoContext(ctx, "proxy: input request needs a capability the client did not declare", "method", c.req.method, "target", mcpwire.Shown(c.target), "missing", missing)
		return errorBody(id, mcpwire.CodeMissingCapability, mcpwire.MissingCapabilityMessage, mcpwire.MissingCapabilityData(missing...)), http.StatusBadRequest, nil
	}
	var cont json.RawMessage
	if resp.result.Has("requestState") {
		s := resp.result["requestState"]
		if s[0] != '"' {
			return garbage("requestState is not a string")
		}
		if len(s) > h.maxState {
			h.log.ErrorContext(ctx, "proxy: upstream requestState too large to seal", "method", c.req.method, "target", mcpwire.Shown(c.target), "bytes", len(s), "limit", h.maxState)
			return errorBody(id, mrtr.CodeInternalError, fmt.Sprintf("upstream requestState of %d bytes exceeds the proxy's limit of %d", len(s), h.maxState), nil), http.StatusOK, nil
		}
		cont = make(json.RawMessage, 0, len(s)+6)
		cont = append(append(append(cont, `{"s":`...), s...), '}')
	}
	asked := slices.Sorted(maps.Keys(reqs))
	inputs := make([]mrtr.Input, len(asked))
	for i, k := range asked {
		m, _ := mcpwire.Member(mcpwire.TrimSpace(reqs[k]), "method") // vetted above: a known method
		inputs[i].Key = k
		inputs[i].Method, _ = mcpwire.StringValue(m)
	}
	tok, err := c.flow.PauseInputs(cont, inputs...)
	if err != nil {
		var re *mrtr.RejectError
		if errors.As(err, &re) || errors.Is(err, mrtr.ErrInvalidArguments) {
			return guardErrorBody(id, err), http.StatusOK, nil
		}
		h.log.ErrorContext(ctx, "proxy: seal the upstream's pause", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", err)
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	var sealed bytes.Buffer
	if err := mcpwire.WriteString(&sealed, tok); err != nil {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	if out, ok := spliceState(b, sealed.Bytes()); ok {
		return out, 0, nil
	}
	resp.result["requestState"] = sealed.Bytes()
	if resp.msg["result"], err = resp.result.Encode(); err == nil {
		out, err = resp.msg.Encode()
	}
	if err != nil {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	return out, 0, nil
}

// spliceState returns the upstream's final message b, already validated,
// with result.requestState's value replaced by state (or the member
// added first in result when b has none), every other byte as the
// upstream wrote it. It refuses (false) when the message or its result
// repeats a member name, which finish then re-encodes from the parsed
// message, so no second requestState, the upstream's own, reaches the
// client.
func spliceState(b, state []byte) ([]byte, bool) {
	t := mcpwire.TrimSpace(b)
	rs, re, ok, unique := mcpwire.MemberSpan(t, "result")
	if !ok || !unique || t[rs] != '{' {
		return nil, false
	}
	ss, se, ok, unique := mcpwire.MemberSpan(t[rs:re], "requestState")
	if !unique {
		return nil, false
	}
	out := make([]byte, 0, len(t)+len(state)+len(`"requestState":,`))
	if ok {
		out = append(out, t[:rs+ss]...)
		out = append(out, state...)
		return append(out, t[rs+se:]...), true
	}
	if mcpwire.TrimSpace(t[rs+1 : re])[0] == '}' {
		return nil, false // an empty result: not input_required, never here
	}
	out = append(out, t[:rs+1]...)
	out = append(append(append(out, `"requestState":`...), state...), ',')
	return append(out, t[rs+1:]...), true
}
