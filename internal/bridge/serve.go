package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// ModernVersion is the protocol version the bridge serves.
const ModernVersion = "2026-07-28"

// The input requests a legacy server sends that a bridged call turns into
// inputRequests.
var inputMethods = []string{mcpwire.MethodElicit, mcpwire.MethodSampling, mcpwire.MethodListRoots}

func (b *Bridge) serve(ctx context.Context, w *pipeWriter, r *http.Request, body []byte) {
	if legacyRequest(r, body) { // a 2025-11-25 client: a session and child of its own
		b.legacy.serve(ctx, w, r, body)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	m, err := rpc.Parse(body)
	if err != nil || m.Method == "" {
		writeMsg(w, http.StatusBadRequest, errorMessage(nil, -32600, "invalid request: one JSON-RPC request expected", nil))
		return
	}
	if m.ID == nil { // a notification: nothing to relay to a legacy session
		w.WriteHeader(http.StatusAccepted)
		return
	}
	params := mcpwire.Object{}
	if len(m.Params) > 0 && m.Params[0] == '{' {
		params = mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))
	}
	out := &responder{w: w, id: m.ID, sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	if v, _ := mcpwire.Member(params["_meta"], mcpwire.MetaProtocolVersion); len(v) == 0 {
		if r.Header.Get("Mcp-Protocol-Version") == ModernVersion { // a 2026-07-28 request that lacks it
			out.fail(http.StatusBadRequest, -32602, "invalid params: missing _meta field "+mcpwire.MetaProtocolVersion+" (the Mcp-Protocol-Version header says "+ModernVersion+"; a "+ModernVersion+" request carries it in params._meta)", nil)
			return
		}
		data, _ := json.Marshal(map[string][]string{"supported": {ModernVersion}})
		out.fail(http.StatusBadRequest, -32022, "unsupported protocol version: this endpoint serves MCP "+ModernVersion+" in front of a "+LegacyVersion+" upstream", data)
		return
	}
	switch {
	case m.Method == "server/discover":
		b.discover(ctx, out)
	case mcpwire.Pausable(m.Method):
		b.pausable(ctx, out, m, params)
	case m.Method == "initialize": // 2026-07-28 has none; never the upstream's session's
		out.fail(http.StatusNotFound, -32601, "method not found: initialize is not a "+ModernVersion+" method", nil)
	case m.Method == "subscriptions/listen":
		out.fail(http.StatusNotFound, -32601, "method not found: subscriptions are not bridged to a "+LegacyVersion+" upstream", nil)
	default:
		b.passOn(ctx, out, m, params)
	}
}

// discover answers server/discover from the upstream's initialize result.
func (b *Bridge) discover(ctx context.Context, out *responder) {
	b.mu.Lock()
	info := b.info
	b.mu.Unlock()
	if info == nil {
		s, err := b.acquire(ctx, key(callerOf(ctx)))
		if err != nil {
			out.fail(http.StatusOK, mrtr.CodeInternalError, err.Error(), nil)
			return
		}
		info = s.info
		b.release(s)
	}
	caps := mcpwire.Object{}
	if len(info.Capabilities) > 0 && info.Capabilities[0] == '{' && json.Valid(info.Capabilities) {
		caps = mcpwire.SplitObject(info.Capabilities)
	}
	// Change notifications need subscriptions/listen, which the bridge
	// does not serve.
	for _, k := range []string{"tools", "prompts", "resources"} {
		if _, ok := caps[k]; ok {
			caps[k] = json.RawMessage("{}")
		}
	}
	capsJSON, _ := caps.Encode()
	res := map[string]any{
		"resultType":        "complete",
		"supportedVersions": []string{ModernVersion},
		"capabilities":      json.RawMessage(capsJSON),
		"ttlMs":             0,
		"cacheScope":        "private",
	}
	if info.Instructions != "" {
		res["instructions"] = info.Instructions
	}
	if len(info.ServerInfo) > 0 {
		res["_meta"] = map[string]json.RawMessage{"io.modelcontextprotocol/serverInfo": info.ServerInfo}
	}
	raw, _ := mcpwire.MarshalNoEscape(res)
	out.result(raw)
}

// passOn runs a request that cannot pause on one of the caller's sessions.
func (b *Bridge) passOn(ctx context.Context, out *responder, m *rpc.Message, params mcpwire.Object) {
	s, err := b.acquire(ctx, key(callerOf(ctx)))
	if err != nil {
		out.fail(http.StatusOK, mrtr.CodeInternalError, err.Error(), nil)
		return
	}
	resp, err := s.conn.Call(ctx, m.Method, legacyParams(params))
	b.release(s)
	switch {
	case errors.Is(err, rpc.ErrClosed):
		out.fail(http.StatusOK, mrtr.CodeInternalError, errLost.Error(), nil)
	case err != nil:
		out.fail(http.StatusOK, mrtr.CodeInternalError, "upstream call abandoned: "+err.Error(), nil)
	case resp.Error != nil:
		out.rpcError(m.Method, resp.Error)
	default:
		out.result(modernResult(m.Method, resp.Result))
	}
}

// pausable runs a first call or a resume of a held one.
func (b *Bridge) pausable(ctx context.Context, out *responder, m *rpc.Message, params mcpwire.Object) {
	target, _ := params.String(mcpwire.TargetParam(m.Method))
	caller := key(callerOf(ctx))
	caps := mcpwire.CapsFromMeta(params["_meta"])
	if st, ok := params.String("requestState"); ok && st != "" {
		b.resume(ctx, out, m, params, st, caller, target, caps)
		return
	}
	s, err := b.acquire(ctx, caller)
	if err != nil {
		out.fail(http.StatusOK, mrtr.CodeInternalError, err.Error(), nil)
		return
	}
	a := b.newActive()
	s.mu.Lock()
	s.active = a // before the request leaves, so nothing the upstream sends is missed
	s.mu.Unlock()
	// Once its response is in, the call is over: what the upstream sends
	// after it is answered as outside a call, never taken as this call's
	// input request (pausing a call that has ended) nor left queued where
	// nobody reads it.
	call, err := s.conn.StartThen(m.Method, legacyParams(params), func() { s.detach(a) })
	if err != nil {
		b.release(s)
		out.fail(http.StatusOK, mrtr.CodeInternalError, errLost.Error(), nil)
		return
	}
	a.call = call
	h := &hold{caller: caller, method: m.Method, target: target, s: s, a: a}
	h.busy.Lock()
	b.relay(ctx, out, h, caps)
}

// resume answers a held call's pending requests with the client's
// answers and relays on.
func (b *Bridge) resume(ctx context.Context, out *responder, m *rpc.Message, params mcpwire.Object, st, caller, target string, caps mcpwire.Caps) {
	node, id, round, ok := parseState(st)
	b.mu.Lock()
	h := b.holds[id]
	b.mu.Unlock()
	if !ok || node != b.o.Node || h == nil {
		// Not held here: expired, or held by a process that restarted
		// since, or by another replica (a resume the proxy did not
		// forward, or whose holder is gone).
		out.fail(http.StatusOK, mrtr.CodeInternalError, errGone.Error(), nil)
		return
	}
	if !h.busy.TryLock() {
		out.fail(http.StatusOK, mrtr.CodeInternalError, errBusyHold.Error(), nil)
		return
	}
	if h.id == "" || h.round != round || h.caller != caller || h.method != m.Method || h.target != target {
		// An older round of this hold (a token sent again without a
		// single-use store), or one the hold was not made for.
		h.busy.Unlock()
		data, _ := json.Marshal(map[string]string{"reason": string(mrtr.ReasonReplayed)})
		out.fail(http.StatusOK, mrtr.CodeInvalidParams, mrtr.RejectMessage, data)
		return
	}
	h.timer.Stop()
	answers, _ := params.Object("inputResponses")
	for _, k := range slices.Sorted(maps.Keys(h.pending)) {
		ans, ok := answers[k]
		if !ok || len(ans) == 0 || ans[0] != '{' {
			continue // asked again below
		}
		if err := h.s.conn.Respond(h.pending[k].ID, ans); err != nil {
			b.endHold(h)
			h.busy.Unlock()
			out.fail(http.StatusOK, mrtr.CodeInternalError, errLost.Error(), nil)
			return
		}
		delete(h.pending, k)
	}
	if len(h.pending) > 0 {
		b.pause(out, h, nil, caps)
		return
	}
	b.relay(ctx, out, h, caps)
}

// relay waits for the held call's next step: its final response, or
// requests that pause it again. h.busy is held and released here.
func (b *Bridge) relay(ctx context.Context, out *responder, h *hold, caps mcpwire.Caps) {
	a := h.a
	var reqs []*rpc.Message
	for {
		for m, ok := a.pop(); ok; m, ok = a.pop() {
			switch {
			case m == nil:
				b.endHold(h)
				h.busy.Unlock()
				out.fail(http.StatusOK, mrtr.CodeInternalError, a.lost().Error(), nil)
				return
			case m.IsNotification():
				if m.Method == "notifications/progress" || m.Method == "notifications/message" {
					out.notify(m)
				}
			case m.Method == mcpwire.MethodListRoots && (!b.o.RootsFromClient || mcpwire.Required(caps, m.Method, m.Params) != ""):
				// The operator's roots, as outside a call: the answer is
				// the boundary of what the upstream may touch, so a
				// remote caller gives it only where the operator lets
				// it (RootsFromClient) and it can. Servers ask for roots
				// unprompted (server-everything 350 ms after initialize),
				// so refusing the call for it would break calls that
				// never needed them.
				h.s.answerRoots(m)
			case slices.Contains(inputMethods, m.Method):
				reqs = append(reqs, m)
			case m.Method == "ping":
				_ = h.s.conn.Respond(m.ID, json.RawMessage("{}"))
			default:
				_ = h.s.conn.RespondError(m.ID, -32601, "method not found: "+m.Method)
			}
		}
		if len(reqs) > 0 {
			b.pause(out, h, reqs, caps)
			return
		}
		select {
		case resp, ok := <-a.call.Response():
			if !ok {
				continue // the nil the session pushed says why
			}
			// Everything the upstream sent before its response is queued
			// already (one reading goroutine): relay it first.
			for m, ok := a.pop(); ok; m, ok = a.pop() {
				if m != nil && m.IsNotification() && (m.Method == "notifications/progress" || m.Method == "notifications/message") {
					out.notify(m)
				} else if m != nil && m.IsRequest() {
					_ = h.s.conn.RespondError(m.ID, -32601, "method not found: the call has ended")
				}
			}
			b.endHold(h)
			b.release(h.s)
			h.busy.Unlock()
			if resp.Error != nil {
				out.rpcError(h.method, resp.Error)
			} else {
				out.result(modernResult(h.method, resp.Result))
			}
			return
		case <-a.signal:
		case <-ctx.Done():
			// The client gave up on this round: the upstream's call is
			// abandoned with it.
			b.abandon(h, "the client went away")
			h.busy.Unlock()
			return
		}
	}
}

// pause ends the client's call with input_required for the upstream's
// pending requests (reqs new ones, added to what is still pending).
func (b *Bridge) pause(out *responder, h *hold, reqs []*rpc.Message, caps mcpwire.Caps) {
	var missing []string
	for _, m := range reqs {
		if need := mcpwire.Required(caps, m.Method, m.Params); need != "" {
			missing = append(missing, need)
		}
	}
	if len(missing) > 0 {
		for _, m := range reqs {
			_ = h.s.conn.RespondError(m.ID, -32601, "the client cannot answer "+m.Method)
		}
		b.abandon(h, "the client cannot answer the server's requests")
		h.busy.Unlock()
		slices.Sort(missing)
		out.fail(http.StatusBadRequest, mcpwire.CodeMissingCapability, mcpwire.MissingCapabilityMessage, mcpwire.MissingCapabilityData(slices.Compact(missing)...))
		return
	}
	b.mu.Lock()
	if h.id == "" {
		if len(b.holds) >= b.o.MaxHolds {
			b.mu.Unlock()
			b.warn.refuse(limitHolds, "bridge: a call was refused: the proxy is at its limit of held calls (--max-holds)", "max", b.o.MaxHolds)
			for _, m := range reqs {
				_ = h.s.conn.RespondError(m.ID, mrtr.CodeInternalError, "the proxy cannot hold the call")
			}
			b.abandon(h, "the proxy is at its limit of held calls")
			h.busy.Unlock()
			out.fail(http.StatusOK, mrtr.CodeInternalError, errTooHeld.Error(), nil)
			return
		}
		h.id = newHoldID()
		h.pending = map[string]*rpc.Message{}
		b.holds[h.id] = h
	}
	b.mu.Unlock()
	for _, m := range reqs {
		h.seq++
		h.pending[inputKey(m.Method, h.seq)] = m
	}
	h.round++
	ttl := b.o.HoldTTL
	if h.caller == "" {
		ttl = b.o.AnonymousHoldTTL
	}
	h.timer = time.AfterFunc(ttl, func() { b.expire(h) })
	irs := make(map[string]json.RawMessage, len(h.pending))
	for k, m := range h.pending {
		// params always: a roots/list carries none upstream, and clients
		// (go-sdk v1.8.0) fail to decode an input request without them.
		ir := mcpwire.Object{"method": mustString(m.Method), "params": json.RawMessage("{}")}
		if len(m.Params) > 0 && string(m.Params) != "null" {
			ir["params"] = m.Params
		}
		irs[k], _ = ir.Encode()
	}
	res, _ := mcpwire.MarshalNoEscape(map[string]any{
		"resultType":    "input_required",
		"inputRequests": irs,
		"requestState":  b.stateOf(h),
	})
	h.busy.Unlock()
	out.result(res)
}

// inputKey names the nth input request of a held call, by its kind.
func inputKey(method string, n int) string {
	kind, _, _ := strings.Cut(method, "/")
	return kind + "-" + strconv.Itoa(n)
}

func mustString(s string) json.RawMessage {
	b, _ := mcpwire.MarshalNoEscape(s)
	return b
}

// legacyParams are a modern request's params as a legacy server takes
// them: without the proxy's requestState and answers and without the
// protocol's own _meta keys (a 2025-11-25 server knows none of them).
func legacyParams(p mcpwire.Object) json.RawMessage {
	q := maps.Clone(p)
	delete(q, "requestState")
	delete(q, "inputResponses")
	if raw, ok := q["_meta"]; ok && len(raw) > 0 && raw[0] == '{' {
		meta := mcpwire.SplitObject(raw)
		for k := range meta {
			if strings.HasPrefix(k, "io.modelcontextprotocol/") {
				delete(meta, k)
			}
		}
		if len(meta) == 0 {
			delete(q, "_meta")
		} else {
			q["_meta"], _ = meta.Encode()
		}
	}
	b, _ := q.Encode()
	return b
}

// cacheable are the methods whose complete results carry ttlMs and
// cacheScope in 2026-07-28.
var cacheable = []string{mcpwire.MethodListTools, mcpwire.MethodListPrompts, mcpwire.MethodListResources,
	mcpwire.MethodListResourceTemplates, mcpwire.MethodReadResource}

// modernResult is a legacy result as a 2026-07-28 client reads it.
func modernResult(method string, raw json.RawMessage) json.RawMessage {
	raw = mcpwire.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		raw = json.RawMessage("{}")
	}
	o := mcpwire.SplitObject(raw)
	if _, ok := o["resultType"]; !ok {
		o["resultType"] = json.RawMessage(`"complete"`)
	}
	if slices.Contains(cacheable, method) {
		if _, ok := o["ttlMs"]; !ok {
			o["ttlMs"] = json.RawMessage("0")
		}
		if _, ok := o["cacheScope"]; !ok {
			o["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	b, _ := o.Encode()
	return b
}

// responder writes one call's answer: JSON, or an event stream once a
// notification has to go out before it (when the client accepts one).
type responder struct {
	w         *pipeWriter
	id        json.RawMessage
	sse       bool
	streaming bool
}

func (o *responder) notify(m *rpc.Message) {
	if !o.sse {
		return
	}
	b, err := m.Encode()
	if err != nil {
		return
	}
	if !o.streaming {
		o.streaming = true
		o.w.Header().Set("Content-Type", "text/event-stream")
		o.w.Header().Set("Cache-Control", "no-cache")
		o.w.WriteHeader(http.StatusOK)
	}
	writeEvent(o.w, b)
}

func (o *responder) send(status int, msg []byte) {
	if o.streaming {
		writeEvent(o.w, msg)
		return
	}
	writeMsg(o.w, status, msg)
}

func (o *responder) result(res json.RawMessage) {
	b, _ := (&rpc.Message{ID: o.id, Result: res}).Encode()
	o.send(http.StatusOK, b)
}

// rpcError relays the upstream's error object; a legacy resource not
// found (-32002) is -32602 in 2026-07-28.
func (o *responder) rpcError(method string, e json.RawMessage) {
	if method == mcpwire.MethodReadResource && len(e) > 0 && e[0] == '{' {
		eo := mcpwire.SplitObject(mcpwire.TrimSpace(e))
		if string(eo["code"]) == "-32002" {
			eo["code"] = json.RawMessage("-32602")
			e, _ = eo.Encode()
		}
	}
	b, _ := (&rpc.Message{ID: o.id, Error: e}).Encode()
	o.send(http.StatusOK, b)
}

func (o *responder) fail(status, code int, message string, data json.RawMessage) {
	o.send(status, errorMessage(o.id, code, message, data))
}

func errorMessage(id json.RawMessage, code int, message string, data json.RawMessage) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := mcpwire.Object{"code": json.RawMessage(strconv.Itoa(code)), "message": mustString(message)}
	if data != nil {
		e["data"] = data
	}
	eb, _ := e.Encode()
	b, _ := (&rpc.Message{ID: id, Error: eb}).Encode()
	return b
}

func writeMsg(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeEvent(w http.ResponseWriter, b []byte) {
	_, _ = w.Write(mcpwire.AppendEvent(nil, [][]byte{[]byte("event: message")}, b))
}
