package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
			up := mcpwire.AppendString(make([]byte, 0, len(id)+2), id)
			if body, ok = replaceAt(req.body, up, nil, "params", "taskId"); ok {
				if np, okp := replaceAt(req.msg["params"], up, nil, "taskId"); okp {
					req.msg["params"] = np
				}
				return body, &taskSwap{caller: raw, upstream: id}, true
			}
		} else if err == errNoTaskKeys {
			h.log.ErrorContext(r.Context(), "proxy: a task request cannot be checked", "method", req.method, "error", err)
		}
	}
	h.log.InfoContext(r.Context(), "proxy: a task request names no task of this caller", "method", req.method)
	caps, _ := mcpwire.Member(p["_meta"], mcpwire.MetaClientCapabilities)
	if !task.Declared(caps) {
		writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeMissingCapability, mcpwire.MissingCapabilityMessage, task.MissingExtensionData)
		return nil, nil, false
	}
	writeError(w, http.StatusBadRequest, req.id, mcpwire.CodeInvalidParams, task.UnknownMessage, nil)
	return nil, nil, false
}

// restoreTask returns out, the upstream's response to a tasks/* request
// (its id already the caller's), with result.taskId, when it names the
// upstream's id, in the caller's form: the same string the caller sent.
// ok is false when it names another task, which the caller must not see.
func (s *taskSwap) restore(out []byte) ([]byte, bool) {
	t := mcpwire.TrimSpace(out)
	rs, re, found, unique := mcpwire.MemberSpan(t, "result")
	if !found {
		return out, true // an error
	}
	if !unique || t[rs] != '{' {
		return nil, false
	}
	ts, te, found, unique := mcpwire.MemberSpan(t[rs:re], "taskId")
	switch {
	case !found:
		return out, true // an acknowledgement
	case !unique:
		return nil, false
	}
	if id, ok := mcpwire.StringValue(t[rs+ts : rs+te]); !ok || id != s.upstream {
		return nil, false
	}
	b := make([]byte, 0, len(t)-(te-ts)+len(s.caller))
	b = append(b, t[:rs+ts]...)
	b = append(b, s.caller...)
	return append(b, t[rs+te:]...), true
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
	resp.result["taskId"] = sealed
	var out []byte
	if resp.msg["result"], err = resp.result.Encode(); err == nil {
		out, err = resp.msg.Encode()
	}
	if err != nil {
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
