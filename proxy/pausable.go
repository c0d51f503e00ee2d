package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// call is one pausable call on its way through the proxy.
type call struct {
	req    *rpcRequest
	flow   *mrtr.Flow
	target string
	// x is the request as sent upstream, under the proxy's id; refused
	// is set once an answer was not the request's (finishMessage).
	x       *exchange
	refused bool
	// who is the caller, to whom a task id is bound (tasks.go).
	who reqstate.Principal
}

// errUpstreamRPC releases a reservation: the upstream answered a resume
// with a JSON-RPC error.
var errUpstreamRPC = errors.New("proxy: upstream answered with a JSON-RPC error")

// errNoResponse is the cause logged for an event stream that ended before
// the call's response.
var errNoResponse = errors.New("proxy: upstream closed the stream without a response")

// pausable runs one tools/call, prompts/get or resources/read: checks any
// requestState with the guard before anything reaches the upstream,
// forwards the upstream's own state and the asked answers, relays the
// upstream's answer and seals an input_required one.
func (h *Handler) pausable(w http.ResponseWriter, r *http.Request, req *rpcRequest) {
	ctx := r.Context()
	target, ok := req.target()
	if !ok {
		writeError(w, http.StatusOK, req.id, mrtr.CodeInvalidParams, "invalid params: "+req.method+" needs a "+mcpwire.TargetParam(req.method), nil)
		return
	}
	principal, err := h.principal(r)
	if err != nil {
		writeError(w, http.StatusUnauthorized, req.id, mcpwire.CodeInvalidRequest, "unauthorized", nil)
		return
	}
	p := req.params
	v, _ := mcpwire.Member(p["_meta"], mcpwire.MetaProtocolVersion)
	version, ok := mcpwire.StringValue(v)
	if !ok {
		version = r.Header.Get("Mcp-Protocol-Version")
	}
	mreq := &mrtr.Request{
		Method:          req.method,
		ProtocolVersion: version,
		Target:          target,
		Principal:       principal,
	}
	if req.method != mcpwire.MethodReadResource {
		mreq.Arguments = p["arguments"]
	}
	if h.watched { // only the Observer and the Auditor read the trace context and clientInfo
		mreq.Meta = traceMeta(p["_meta"])
		mreq.RequestID = string(req.id)
	}
	// The proxy only translates what the body holds; the guard decides.
	if p.Has("requestState") {
		// An empty state is no state, as for the guard: a first call.
		mreq.RequestState, ok = p.String("requestState")
		mreq.BadState = !ok
	}
	// Answers are read only beside a state to check. A call without one
	// is a first call, and its answers are nobody's: every pause through
	// the proxy carries a sealed token (even when the upstream sent no
	// state), so a legitimate resume always has one. upstreamBody drops
	// them, so the upstream never runs a resume the guard did not check.
	if _, present := p["inputResponses"]; present {
		answers, isObj := p.Object("inputResponses")
		mreq.BadResponses = !isObj || len(answers) == 0
		if mreq.RequestState != "" && len(answers) > 0 {
			mreq.InputResponses = make(map[string]any, len(answers))
			for k, v := range answers {
				mreq.InputResponses[k] = v
			}
		}
	}
	if h.peers != nil && mreq.RequestState != "" && h.routed(w, r, req, mreq) { // peers.go
		return
	}
	// Sent under the proxy's own id (ids.go), recorded before the guard
	// runs: a request refused here spends no token.
	x := h.newExchange(req.id, req.method)
	x.who = principal
	key := cancelKey{who: principal, session: r.Header.Get("Mcp-Session-Id"), id: string(req.id)}
	if !h.live.add(key, x.sent) {
		writeError(w, http.StatusOK, req.id, mcpwire.CodeInvalidRequest, msgIDInUse, nil)
		return
	}
	defer h.live.remove(key, x.sent)
	fl, err := h.guard.Begin(ctx, mreq)
	if err != nil {
		writeGuardError(w, req.id, err)
		return
	}
	c := &call{req: req, flow: fl, target: target, x: x, who: principal}
	// A transport that serves callers separately (the bridge) learns the
	// caller through the upstream request's context.
	release := h.forward(w, r.WithContext(bridge.WithCaller(ctx, principal)), c)
	if release == nil && fl.Resumed() && h.slowStore {
		// Spending the token: its reservation already holds until the
		// token expires (replay.Store), so the commit only confirms it and
		// need not hold the response back (net/http sends the last bytes
		// when the handler returns). A commit that is lost is a lost
		// commit: the token stays spent. A release, which lets the user
		// send the same requestState again, stays on the response's path.
		go func() { _ = fl.End(context.WithoutCancel(ctx), nil) }() // bounded by the guard's StoreTimeout
		return
	}
	_ = fl.End(ctx, release) // a failed commit or release is logged by the guard
}

// upstreamBody returns the body the upstream receives for a call whose
// params change: on a resume, its own requestState (byte for byte, none if
// it sent none) and only the answers to the keys it asked; otherwise the
// client's params without any requestState or inputResponses member (null
// and empty ones included), so that only a resume the guard checked ever
// reaches the upstream as one. The two members are spliced into the
// client's bytes (every other member as the client wrote it; the names are
// unique, parseRequest); the message is encoded again from its parsed
// members only when it cannot be (an envelope of more than 16 members).
func upstreamBody(c *call) ([]byte, error) {
	state, answers, err := resumeMembers(c.flow)
	if err != nil {
		return nil, err
	}
	t := mcpwire.TrimSpace(c.req.body)
	if ps, pe, ok, unique := mcpwire.MemberSpan(t, "params"); ok && unique {
		out := make([]byte, 0, len(t)+len(state)+len(answers)+len(`,"requestState":,"inputResponses":`))
		out = append(out, t[:ps]...)
		out, ok = mcpwire.AppendEdited(out, t[ps:pe],
			mcpwire.Edit{Name: "requestState", Value: state}, mcpwire.Edit{Name: "inputResponses", Value: answers})
		if ok {
			return append(out, t[pe:]...), nil
		}
	}
	p := maps.Clone(c.req.params)
	delete(p, "requestState")
	delete(p, "inputResponses")
	if state != nil {
		p["requestState"] = state
	}
	if answers != nil {
		p["inputResponses"] = answers
	}
	msg := maps.Clone(c.req.msg)
	if msg["params"], err = p.Encode(); err != nil {
		return nil, err
	}
	return msg.Encode()
}

// resumeMembers returns what a resume gives the upstream: its own
// requestState as finish sealed it (nil if it sent none) and the answers
// to the keys it asked, as one object (nil if none). A first call gives
// nothing.
func resumeMembers(fl *mrtr.Flow) (state, answers json.RawMessage, err error) {
	if !fl.Resumed() {
		return nil, nil, nil
	}
	var cont json.RawMessage // {"s": the upstream's state}, as finish sealed it
	if err := fl.Continuation(&cont); err == nil {
		state, _ = mcpwire.Member(mcpwire.TrimSpace(cont), "s")
	} else if !errors.Is(err, mrtr.ErrNoContinuation) {
		return nil, nil, err
	}
	for _, k := range fl.Asked() {
		v, ok := fl.Answer(k)
		if !ok {
			continue
		}
		raw, ok := v.(json.RawMessage)
		if !ok {
			return nil, nil, fmt.Errorf("answer %q is %T, not raw JSON", k, v)
		}
		if answers == nil {
			answers = append(make(json.RawMessage, 0, 64), '{')
		} else {
			answers = append(answers, ',')
		}
		answers = append(mcpwire.AppendString(answers, k), ':')
		answers = append(answers, raw...)
	}
	if answers != nil {
		answers = append(answers, '}')
	}
	return state, answers, nil
}

// hasAny reports whether o has any of the members, null ones included.
func hasAny(o object, names ...string) bool {
	for _, n := range names {
		if _, ok := o[n]; ok {
			return true
		}
	}
	return false
}
