package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/task"
)

// methodListen is the 2026-07-28 subscription stream, never bounded by
// the upstream timeout.
const methodListen = "subscriptions/listen"

// object is a JSON object as package mcpwire reads it.
type object = mcpwire.Object

// rpcRequest is what the proxy reads of one client POST body: the
// envelope and, for the pausable methods, the params.
type rpcRequest struct {
	msg    object
	id     json.RawMessage // nil for a notification or a response
	method string
	params object // nil when absent
	body   []byte // as received; forwarded as is when nothing in it changes
	// x is the request as the pass-through path sent it upstream, under
	// the proxy's own id; nil for a notification or a response.
	x *exchange
}

var errBadRequest = errors.New("not a JSON-RPC message")

// foldedNameError is parseRequest's error for a member whose name equals a
// protocol member's name only under case folding. id is the request's id
// when the envelope was sound and the name is in its params, so the answer
// names the request; nil otherwise.
type foldedNameError struct{ id json.RawMessage }

func (*foldedNameError) Error() string {
	return "member name differs from a protocol name only in case"
}

// Member names the proxy reads, in the envelope and in a pausable call's
// params.
var (
	envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramNames    = []string{"name", "uri", "arguments", "_meta", "requestState", "inputResponses"}
	// taskParamNames: the params of tasks/get, tasks/update, tasks/cancel.
	taskParamNames = []string{"taskId", "_meta", "inputResponses"}
	// listenParamNames and listenNotifNames: the members of a
	// subscriptions/listen request that lead to the task ids it names.
	listenParamNames = []string{listenNotifsMember, "_meta"}
	listenNotifNames = []string{listenTaskIDs}
)

// foldedName reports whether o has a member whose name is not one of names
// but equals one of them under Unicode case folding. encoding/json (and so
// mcp-go) matches struct fields that way, so an upstream would read such a
// member as the one the proxy judged by its exact name.
func foldedName(o object, names []string) bool {
	for k := range o {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return true
			}
		}
	}
	return false
}

// parseRequest reads a client's POST body. It accepts any JSON-RPC object
// (request, notification or a legacy client's response) whose member names
// do not repeat, at its top level or in the params of a pausable call (a
// parser keeping the first of them could read another message than the
// proxy judged); a batch or anything else is an error.
func parseRequest(body []byte) (*rpcRequest, error) {
	msg, err := mcpwire.ParseUniqueObject(body)
	if err != nil {
		return nil, err
	}
	if foldedName(msg, envelopeNames) {
		return nil, &foldedNameError{}
	}
	r := &rpcRequest{msg: msg, body: body}
	if id, ok := msg["id"]; ok && !bytes.Equal(id, []byte("null")) {
		if id[0] != '"' && (id[0] < '0' || id[0] > '9') && id[0] != '-' {
			return nil, errBadRequest
		}
		r.id = id
	}
	if _, ok := msg["method"]; ok {
		m, ok := msg.String("method")
		if !ok {
			return nil, errBadRequest
		}
		r.method = m
	}
	if (mcpwire.Pausable(r.method) || task.IsMethod(r.method)) && r.id != nil {
		var ok bool
		if r.params, ok = msg.UniqueObject("params"); !ok {
			return nil, errBadRequest
		}
		names := paramNames
		if task.IsMethod(r.method) {
			names = taskParamNames
		}
		if foldedName(r.params, names) {
			return nil, &foldedNameError{id: r.id}
		}
	}
	if r.method == methodListen && r.id != nil && msg.Has("params") {
		// The task ids it names are opened and rewritten (tasks.go): their
		// members must read alike to the proxy and to the upstream.
		p, ok := msg.UniqueObject("params")
		if !ok {
			return nil, errBadRequest
		}
		if foldedName(p, listenParamNames) {
			return nil, &foldedNameError{id: r.id}
		}
		if p.Has(listenNotifsMember) {
			n, ok := p.UniqueObject(listenNotifsMember)
			if !ok {
				return nil, errBadRequest
			}
			if foldedName(n, listenNotifNames) {
				return nil, &foldedNameError{id: r.id}
			}
		}
	}
	return r, nil
}

// target is the name or URI a pausable call is bound to.
func (r *rpcRequest) target() (string, bool) {
	return r.params.String(mcpwire.TargetParam(r.method))
}

// rpcResponse is a server's final message for one request.
type rpcResponse struct {
	msg    object
	result object // nil for an error response
}

// isResponse reports whether a message is a JSON-RPC response (it has a
// result or an error and no method), reading as little as it can.
func isResponse(msg object) bool {
	_, m := msg["method"]
	_, r := msg["result"]
	_, e := msg["error"]
	return !m && (r || e)
}

var errNotResponse = errors.New("not a JSON-RPC response")

// parseResponse reads b as a response; msg is b already parsed, or nil.
func parseResponse(b []byte, msg object) (*rpcResponse, error) {
	if msg == nil {
		var err error
		if msg, err = mcpwire.ParseObject(b); err != nil {
			return nil, err
		}
	}
	if !isResponse(msg) {
		return nil, errNotResponse
	}
	r := &rpcResponse{msg: msg}
	if _, ok := msg["result"]; ok {
		if r.result, ok = msg.Object("result"); !ok {
			return nil, errNotResponse
		}
	}
	return r, nil
}

func (r *rpcResponse) inputRequired() bool {
	t, _ := r.result.String("resultType")
	return r.result != nil && t == "input_required"
}
