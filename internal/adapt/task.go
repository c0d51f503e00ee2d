package adapt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// This file is what both adapters do for the tasks extension
// (io.modelcontextprotocol/tasks) once they have read a tasks/* request
// out of their SDK: the order of its checks, its answers and its errors.

// TaskContext returns ctx carrying what the events of a task this call
// creates say of it (task.WithCall).
func (c *Call) TaskContext(ctx context.Context) context.Context {
	return task.WithCall(ctx, task.Call{Method: c.Method, ProtocolVersion: c.Version, Target: c.Target, Principal: c.Principal,
		Meta: c.Meta}, c.Arguments)
}

// TaskParams are the params of tasks/get, tasks/update and tasks/cancel.
type TaskParams struct {
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// TaskAck is the result of tasks/update and tasks/cancel.
var TaskAck = json.RawMessage(`{"resultType":"complete"}`)

var (
	// MissingTasks is the -32021 error of a request that did not declare
	// the extension: data.requiredCapabilities.extensions names it.
	MissingTasks = &WireError{Code: mcpwire.CodeMissingCapability, Message: mcpwire.MissingCapabilityMessage, Data: task.MissingExtensionData}
	// UnknownTask is what every tasks/* request for a task that is not the
	// caller's gets: the same for an unknown id and another's task.
	UnknownTask = &WireError{Code: mcpwire.CodeInvalidParams, Message: task.UnknownMessage}
	// InvalidTaskParams is the -32602 error of params that do not decode.
	InvalidTaskParams = &WireError{Code: mcpwire.CodeInvalidParams, Message: "invalid params"}

	badTaskResponses = &WireError{Code: mcpwire.CodeInvalidParams, Message: "invalid params: inputResponses must be an object"}
)

// ServeTask serves one tasks/get, tasks/update or tasks/cancel (c.Method)
// for m, in this order: the -32021 gate (declared: the request declared the
// extension; nothing is looked up otherwise), the caller (principal, called
// only past the gate), and the one lookup of (server, principal, id). It
// returns the result, or a *WireError of the contract, or principal's error
// as principal returned it. A store failure is logged and answered as
// Internal. c describes the request to the manager's Observer
// (task.WithCall); a refusal at the gate is reported to it here, with the
// caller when principal knows it.
func ServeTask(ctx context.Context, m *task.Manager, c task.Call, declared bool, p TaskParams,
	principal func() (reqstate.Principal, error), logger *slog.Logger) (json.RawMessage, error) {
	method := c.Method
	ctx = task.WithCall(ctx, c, nil)
	if !declared {
		who, _ := principal() // for the event only: nothing is looked up
		m.Rejected(ctx, who, method, task.ReasonMissingExtension)
		return nil, MissingTasks
	}
	who, err := principal()
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	switch method {
	case task.MethodGet:
		raw, err = m.Get(ctx, who, p.TaskID)
	case task.MethodUpdate:
		var responses map[string]json.RawMessage
		if json.Unmarshal(p.InputResponses, &responses) != nil || responses == nil {
			return nil, badTaskResponses
		}
		raw, err = TaskAck, m.Update(ctx, who, p.TaskID, responses)
	case task.MethodCancel:
		raw, err = TaskAck, m.Cancel(ctx, who, p.TaskID)
	default:
		return nil, fmt.Errorf("adapt: %q is no tasks method", method) // programmer error of the adapter
	}
	switch {
	case errors.Is(err, task.ErrUnknown):
		return nil, UnknownTask
	case err != nil:
		logger.ErrorContext(ctx, "a tasks request failed", "method", method, "err", err)
		return nil, Internal
	}
	return raw, nil
}

// TaskNameMismatch answers a 2026-07-28 tasks/get, tasks/update or
// tasks/cancel whose Mcp-Name header is missing or is not its
// params.taskId (surrounding whitespace aside) with HTTP 400 and the
// JSON-RPC error -32020, and reports whether it did. It looks only at a
// request whose Mcp-Method header names such a method. The extension makes
// the header required on these methods so that intermediaries can route by
// task.
func TaskNameMismatch(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !task.IsMethod(strings.TrimSpace(r.Header.Get("Mcp-Method"))) {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID json.RawMessage `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || !task.IsMethod(msg.Method) {
		return false // the SDK answers what is not one such request
	}
	var id string
	if json.Unmarshal(msg.Params.TaskID, &id) != nil {
		return false // no string taskId: the method's own -32602
	}
	name, ok := r.Header["Mcp-Name"]
	var text string
	switch {
	case !ok || len(name) == 0:
		text = fmt.Sprintf("missing required Mcp-Name header for method %q", msg.Method)
	case len(name) > 1 || strings.TrimSpace(name[0]) != id:
		text = "header mismatch: the Mcp-Name header does not match params.taskId"
	default:
		return false
	}
	WriteError(w, msg.ID, http.StatusBadRequest, &WireError{Code: mcpwire.CodeHeaderMismatch, Message: text})
	return true
}

// WriteError answers an HTTP request with the JSON-RPC error e for the
// request id and the HTTP status.
func WriteError(w http.ResponseWriter, id json.RawMessage, status int, e *WireError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(ErrorResponse("2.0", id, e))
}

// ErrorResponse returns the JSON-RPC response (version jsonrpc) carrying
// the error e for the request id (null when empty).
func ErrorResponse(jsonrpc string, id json.RawMessage, e *WireError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type errObj struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{jsonrpc, id, errObj{e.Code, e.Message, e.Data}})
	return out
}
