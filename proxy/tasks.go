package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// taskUpstream is how a task id's binding names the upstream: its URL's
// scheme, host and path (the query, which may hold a credential, and the
// userinfo are left out). Replicas in front of one upstream must name it
// alike.
func taskUpstream(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + u.EscapedPath()
}

// taskSwap is a tasks/* request on its way: the task id as the caller
// sent it (a JSON string, as written) and the upstream's id it opened to.
type taskSwap struct {
	caller   json.RawMessage
	upstream string
}

// taskRequest opens the task id of a tasks/get, tasks/update or
// tasks/cancel under the caller's binding and returns the body to send
// upstream (the upstream's id in params.taskId, nothing else changed) and
// the swap for its answer. A task id that does not open (another caller's,
// forged, truncated, too long, moved from another upstream or server) is
// answered here, as the upstream answers an id it does not know, and
// nothing reaches the upstream: -32602 task.UnknownMessage, or -32021 when
// the request does not declare the extension, since the upstream's gate
// comes before any lookup. ok is false once it has answered.
func (h *Handler) taskRequest(w http.ResponseWriter, r *http.Request, req *rpcRequest, who reqstate.Principal) (body []byte, swap *taskSwap, ok bool) {
	p := req.params
	raw, has := p["taskId"]
	tid, isStr := mcpwire.StringValue(raw)
	if has && isStr {
		if id, err := h.tasks.open(who, tid); err == nil {
			if body, ok = withTaskID(req, mcpwire.AppendString(make([]byte, 0, len(id)+2), id)); ok {
				return body, &taskSwap{caller: raw, upstream: id}, true
			}
		} else if err == errNoTaskKeys {
			h.log.ErrorContext(r.Context(), "proxy: a task request cannot be checked", "method", req.method, "error", err)
		}
	}
	h.log.InfoContext(r.Context(), "proxy: a task request names no task of this caller", "method", req.method)
	caps, _ := mcpwire.Member(p["_meta"], mcpwire.MetaClientCapabilities)
	if !task.Declared(caps) {
		h.taskRejected(r, req, who, task.ReasonMissingExtension)
		writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeMissingCapability, mcpwire.MissingCapabilityMessage, task.MissingExtensionData)
		return nil, nil, false
	}
	h.taskRejected(r, req, who, task.ReasonUnknownTask)
	writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeInvalidParams, task.UnknownMessage, nil)
	return nil, nil, false
}

// taskRejected reports a tasks/* request refused here to the
// Options.TaskObserver: the request as the caller sent it, never the id
// it named (a bearer capability for anonymous callers, and here one that
// names no task of the caller's).
func (h *Handler) taskRejected(r *http.Request, req *rpcRequest, who reqstate.Principal, reason task.Reason) {
	if h.taskObs == nil {
		return
	}
	c := task.Call{Method: req.method, Principal: who, RequestID: string(req.id)}
	c.Meta = traceMeta(req.params["_meta"])
	if v, ok := mcpwire.Member(req.params["_meta"], mcpwire.MetaProtocolVersion); ok {
		c.ProtocolVersion, _ = mcpwire.StringValue(v)
	}
	h.taskObs.TaskRejected(r.Context(), task.RejectEvent{Event: task.Event{Call: c}, Reason: reason})
}

// withTaskID returns req's body with up (a JSON string) as its
// params.taskId, and req.msg to match: spliced into the bytes as written,
// or encoded again from the parsed message when they cannot be (an
// object of more than 16 members on the way; the names are unique,
// parseRequest).
func withTaskID(req *rpcRequest, up json.RawMessage) ([]byte, bool) {
	if body, ok := replaceAt(req.body, up, nil, "params", "taskId"); ok {
		t := mcpwire.TrimSpace(body)
		ps, pe, _, _ := mcpwire.MemberSpan(t, "params")
		req.msg["params"] = t[ps:pe:pe]
		return body, true
	}
	p := maps.Clone(req.params)
	p["taskId"] = up
	np, err := p.Encode()
	if err != nil {
		return nil, false
	}
	req.msg["params"] = np
	body, err := req.msg.Encode()
	return body, err == nil
}

// restore returns out, the upstream's response to a tasks/* request
// (its id already the caller's), with result.taskId, when it names the
// upstream's id, in the caller's form: the same string the caller sent.
// ok is false when it names another task, which the caller must not see,
// or when a member name repeats on the way.
func (s *taskSwap) restore(out []byte) ([]byte, bool) {
	t := mcpwire.TrimSpace(out)
	rs, re, found, unique := mcpwire.MemberSpan(t, "result")
	switch {
	case !unique:
		return s.restoreParsed(t)
	case !found:
		return out, true // an error
	case t[rs] != '{':
		return nil, false
	}
	ts, te, found, unique := mcpwire.MemberSpan(t[rs:re], "taskId")
	switch {
	case !unique:
		return s.restoreParsed(t)
	case !found:
		return out, true // an acknowledgement
	}
	if id, ok := mcpwire.StringValue(t[rs+ts : rs+te]); !ok || id != s.upstream {
		return nil, false
	}
	b := make([]byte, 0, len(t)-(te-ts)+len(s.caller))
	b = append(b, t[:rs+ts]...)
	b = append(b, s.caller...)
	return append(b, t[rs+te:]...), true
}

// restoreParsed is restore for a message the splice cannot edit (an
// object of more than 16 members on the way): parsed, its names unique,
// and encoded again.
func (s *taskSwap) restoreParsed(t []byte) ([]byte, bool) {
	msg, err := mcpwire.ParseUniqueObject(t)
	if err != nil {
		return nil, false
	}
	if !msg.Has("result") {
		return t, true
	}
	res, ok := msg.UniqueObject("result")
	if !ok {
		return nil, false
	}
	if !res.Has("taskId") {
		return t, true
	}
	if id, ok := res.String("taskId"); !ok || id != s.upstream {
		return nil, false
	}
	return withResultTaskID(msg, res, s.caller)
}

// withResultTaskID encodes msg again with v as result.taskId (res is its
// result, parsed).
func withResultTaskID(msg, res object, v json.RawMessage) ([]byte, bool) {
	res, msg = maps.Clone(res), maps.Clone(msg)
	res["taskId"] = v
	var err error
	if msg["result"], err = res.Encode(); err != nil {
		return nil, false
	}
	out, err := msg.Encode()
	return out, err == nil
}

// sealCreated turns the upstream's CreateTaskResult (resultType "task")
// of call c into the caller's: its taskId sealed under the caller's
// binding (taskid.go), every other byte as the upstream wrote it.
func (h *Handler) sealCreated(ctx context.Context, c *call, b []byte, resp *rpcResponse) ([]byte, int, error) {
	id := c.req.id
	up, ok := resp.result.String("taskId")
	if !ok {
		h.log.ErrorContext(ctx, "proxy: upstream answered an invalid CreateTaskResult", "method", c.req.method, "target", mcpwire.Shown(c.target), "error", "taskId is not a string")
		return errorBody(id, mcpwire.CodeInternalError, "upstream answered an invalid message", nil), http.StatusOK, nil
	}
	tid, err := h.tasks.seal(c.who, up)
	if err != nil {
		h.log.ErrorContext(ctx, "proxy: seal the upstream's task id", "method", c.req.method, "target", mcpwire.Shown(c.target), "bytes", len(up), "limit", MaxUpstreamTaskID, "error", err)
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	sealed := mcpwire.AppendString(make([]byte, 0, len(tid)+2), tid)
	if out, ok := replaceAt(b, sealed, nil, "result", "taskId"); ok {
		return out, 0, nil
	}
	// Repeated names or more than 16 members: encoded again, with one
	// taskId, the sealed one.
	out, ok := withResultTaskID(resp.msg, resp.result, sealed)
	if !ok {
		return errorBody(id, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil), http.StatusOK, nil
	}
	return out, 0, nil
}

// headerSafe is v as an MCP header value: itself when it is visible ASCII
// without surrounding spaces, else the spec's =?base64?...?= form.
func headerSafe(v string) string {
	safe := v != "" && v[0] != ' ' && v[len(v)-1] != ' '
	for i := 0; safe && i < len(v); i++ {
		safe = v[i] >= 0x20 && v[i] < 0x7f
	}
	if safe && !strings.HasPrefix(v, "=?") {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// isTaskResult reports whether a result is a CreateTaskResult.
func isTaskResult(result object) bool {
	t, _ := result.String("resultType")
	return t == "task"
}

// Task status notifications (notifications/tasks) and the
// subscriptions/listen requests that ask for them name tasks too: a
// caller lists its task ids in params.notifications.taskIds, the
// upstream acknowledges the ids it will report on
// (notifications/subscriptions/acknowledged) and then sends
// notifications/tasks naming each.

// Methods of the listen stream that name tasks.
const (
	methodTaskStatus   = "notifications/tasks"
	methodListenAcked  = "notifications/subscriptions/acknowledged"
	listenNotifsMember = "notifications"
	listenTaskIDs      = "taskIds"
)

// listenTasks rewrites the taskIds of a subscriptions/listen request for
// the upstream: each id that opens under the caller's binding becomes the
// upstream's id, and every other entry (another caller's id, a forged
// one, anything that is not a string) becomes "", which names no task but
// keeps the request one that asks for task notifications, so that the
// upstream's -32021 gate still applies. It returns the body to send and
// the caller's form of each upstream id (nil when the request names no
// task); ok is false when the body cannot be rewritten.
func (h *Handler) listenTasks(req *rpcRequest, who reqstate.Principal) (body []byte, names map[string]json.RawMessage, ok bool) {
	notifs, _ := mcpwire.Member(req.msg["params"], listenNotifsMember)
	raw, has := mcpwire.Member(notifs, listenTaskIDs)
	if !has {
		return req.body, nil, true
	}
	var ids []json.RawMessage
	if json.Unmarshal(raw, &ids) != nil {
		return req.body, nil, true // not an array: no task is named, the upstream judges it
	}
	names = make(map[string]json.RawMessage, len(ids))
	arr := append(make([]byte, 0, len(raw)), '[')
	for i, v := range ids {
		if i > 0 {
			arr = append(arr, ',')
		}
		up := ""
		if tid, isStr := mcpwire.StringValue(v); isStr {
			if id, err := h.tasks.open(who, tid); err == nil {
				up = id
				names[id] = v
			}
		}
		arr = mcpwire.AppendString(arr, up)
	}
	arr = append(arr, ']')
	if body, ok = replaceAt(req.body, arr, nil, "params", listenNotifsMember, listenTaskIDs); !ok {
		// An object of more than 16 members on the way (the names are
		// unique, parseRequest): encoded again from the parsed message.
		p, _ := req.msg.UniqueObject("params")
		n, isObj := p.UniqueObject(listenNotifsMember)
		if !isObj {
			return nil, nil, false
		}
		n, p, msg := maps.Clone(n), maps.Clone(p), maps.Clone(req.msg)
		n[listenTaskIDs] = arr
		var err error
		if p[listenNotifsMember], err = n.Encode(); err == nil {
			if msg["params"], err = p.Encode(); err == nil {
				body, err = msg.Encode()
			}
		}
		if err != nil {
			return nil, nil, false
		}
	}
	msg, err := mcpwire.ParseObject(body)
	if err != nil {
		return nil, nil, false
	}
	req.msg = msg
	return body, names, true
}

// taskName returns the caller's form of the upstream's task id up on the
// exchange x: the id the caller named in its tasks/* request or listed in
// its listen request. ok is false for any other task.
func (x *exchange) taskName(up string) (json.RawMessage, bool) {
	if x.task != nil && x.task.upstream == up {
		return x.task.caller, true
	}
	n, ok := x.tasks[up]
	return n, ok
}

// namesTasks reports whether d, one message of an upstream's stream, may
// be a notification that names tasks (cheaply, before it is parsed).
func namesTasks(d []byte) bool {
	return bytes.Contains(d, []byte(`"`+methodTaskStatus+`"`)) || bytes.Contains(d, []byte(`"`+methodListenAcked+`"`))
}

// taskNotice returns d, a notification of the upstream's on the stream of
// exchange x (msg parsed), with the task ids it names in the caller's
// form. A notifications/tasks naming a task the caller did not name on
// this exchange is dropped (keep false): the proxy cannot tell whose it
// is. An acknowledgement keeps only the ids the caller named. Any other
// message comes back as it is.
func (x *exchange) taskNotice(d []byte, msg object) (out []byte, keep bool) {
	m, _ := msg.String("method")
	switch m {
	case methodTaskStatus:
		up, _ := mcpwire.StringValue(mustMember(msg["params"], "taskId"))
		name, ok := x.taskName(up)
		if !ok {
			return nil, false
		}
		return replaceAt(d, name, nil, "params", "taskId")
	case methodListenAcked:
		notifs, _ := mcpwire.Member(msg["params"], listenNotifsMember)
		raw, has := mcpwire.Member(notifs, listenTaskIDs)
		var ids []json.RawMessage
		if !has {
			return d, true
		}
		if json.Unmarshal(raw, &ids) != nil {
			ids = nil // not an array: it names no task of the caller's
		}
		arr := []byte{'['}
		for _, v := range ids {
			up, isStr := mcpwire.StringValue(v)
			if name, ok := x.taskName(up); isStr && ok {
				if len(arr) > 1 {
					arr = append(arr, ',')
				}
				arr = append(arr, name...)
			}
		}
		arr = append(arr, ']')
		return replaceAt(d, arr, nil, "params", listenNotifsMember, listenTaskIDs)
	}
	return d, true
}

// sealNotice returns d, a notifications/tasks in the event stream of a
// pausable call of who's (msg parsed), with its taskId sealed to who: the
// task is the one the call is creating, and the sealed id is the same
// string its CreateTaskResult will carry. Anything else comes back as it
// is; keep is false when its taskId cannot be sealed.
func (h *Handler) sealNotice(d []byte, msg object, who reqstate.Principal) (out []byte, keep bool) {
	if m, _ := msg.String("method"); m != methodTaskStatus {
		return d, true
	}
	up, _ := mcpwire.StringValue(mustMember(msg["params"], "taskId"))
	tid, err := h.tasks.seal(who, up)
	if err != nil {
		return nil, false
	}
	return replaceAt(d, mcpwire.AppendString(nil, tid), nil, "params", "taskId")
}

// mustMember is mcpwire.Member without its ok.
func mustMember(obj json.RawMessage, key string) json.RawMessage {
	v, _ := mcpwire.Member(obj, key)
	return v
}

// sealPassed returns out, the response to a request of the pass-through
// path (its id already the caller's), with the taskId of a
// CreateTaskResult sealed to the caller, as a tools/call's is: the
// extension may let more methods answer with a task, and no upstream id
// reaches a caller. An answer to a tasks/* request is left as
// restoreIDs made it. A CreateTaskResult whose id cannot be sealed is
// answered with -32603.
func (h *Handler) sealPassed(ctx context.Context, x *exchange, out []byte) []byte {
	if x.task != nil || !bytes.Contains(out, []byte(`"task"`)) {
		return out
	}
	resp, err := parseResponse(out, nil)
	if err != nil || resp.result == nil || !isTaskResult(resp.result) {
		return out
	}
	up, ok := resp.result.String("taskId")
	tid, err := h.tasks.seal(x.who, up)
	if !ok || err != nil {
		h.log.ErrorContext(ctx, "proxy: seal the upstream's task id", "bytes", len(up), "limit", MaxUpstreamTaskID, "error", err)
		return errorBody(x.caller, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil)
	}
	sealed := mcpwire.AppendString(nil, tid)
	if b, ok := replaceAt(out, sealed, nil, "result", "taskId"); ok {
		return b
	}
	if b, ok := withResultTaskID(resp.msg, resp.result, sealed); ok {
		return b
	}
	return errorBody(x.caller, mcpwire.CodeInternalError, mcpwire.InternalMessage, nil)
}
