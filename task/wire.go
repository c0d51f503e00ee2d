package task

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Method names of the extension and its identifier.
const (
	// Extension is the extension's identifier, under which a client
	// declares it (clientCapabilities.extensions) and a server advertises
	// it (server/discover).
	Extension = "io.modelcontextprotocol/tasks"

	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"
)

// IsMethod reports whether method is one of tasks/get, tasks/update and
// tasks/cancel.
func IsMethod(method string) bool {
	return method == MethodGet || method == MethodUpdate || method == MethodCancel
}

// Declared reports whether a clientCapabilities object (its JSON) declares
// the extension: extensions holds Extension with an object value.
func Declared(clientCapabilities json.RawMessage) bool {
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(clientCapabilities, &c) != nil {
		return false
	}
	v, ok := c.Extensions[Extension]
	return ok && len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '{'
}

// MissingExtensionData is the data of the -32021 error that refuses a
// caller who did not declare the extension.
var MissingExtensionData = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + Extension + `":{}}}}`)

// timeLayout is ISO 8601 in UTC with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// wireTask is the Task shape with its status-specific members.
type wireTask struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         Status                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          json.RawMessage            `json:"error,omitempty"`
}

func baseOf(id string, r *Record, resultType string) wireTask {
	return wireTask{
		ResultType: resultType, TaskID: id, Status: r.Status, StatusMessage: r.Message,
		CreatedAt: r.Created.UTC().Format(timeLayout), LastUpdatedAt: r.Updated.UTC().Format(timeLayout),
		TTLMs: r.TTL.Milliseconds(), PollIntervalMs: r.PollInterval.Milliseconds(),
	}
}

// CreateResult returns the CreateTaskResult of task id: the Task with
// resultType "task", and never a result, error, inputRequests or
// requestState.
func CreateResult(id string, r *Record) json.RawMessage {
	b, _ := json.Marshal(baseOf(id, r, "task"))
	return b
}

// DetailedResult returns the result of tasks/get: the DetailedTask of
// task id with resultType "complete" (inputRequests when input_required,
// result when completed, error when failed).
func DetailedResult(id string, r *Record) json.RawMessage {
	w := baseOf(id, r, "complete")
	switch r.Status {
	case InputRequired:
		w.InputRequests = r.Requests
		if w.InputRequests == nil {
			w.InputRequests = map[string]json.RawMessage{}
		}
	case Completed:
		w.Result = r.Result
	case Failed:
		w.Error = r.Error
	}
	b, _ := json.Marshal(w)
	return b
}

// requestMethod returns the method of an input request ({"method",
// "params"}).
func requestMethod(req json.RawMessage) string {
	var r struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(req, &r)
	return r.Method
}

// fits reports whether answer has the shape of a response to an input
// request of method: an elicitation result (action accept, decline or
// cancel; content, when present, an object), a sampling result (role,
// content, model) or a roots result (a roots array). An answer that does
// not fit is never taken: its key stays outstanding, as a mistyped answer
// to a paused call leaves the handler to ask again.
func fits(method string, answer json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(answer, &m) != nil || m == nil {
		return false
	}
	switch method {
	case "elicitation/create":
		var action string
		if json.Unmarshal(m["action"], &action) != nil || !slices.Contains([]string{"accept", "decline", "cancel"}, action) {
			return false
		}
		if c, ok := m["content"]; ok && !isKind(c, '{') && !bytes.Equal(bytes.TrimSpace(c), []byte("null")) {
			return false
		}
		return true
	case "sampling/createMessage":
		var role, model string
		return json.Unmarshal(m["role"], &role) == nil && role != "" &&
			json.Unmarshal(m["model"], &model) == nil &&
			(isKind(m["content"], '{') || isKind(m["content"], '['))
	case "roots/list":
		return isKind(m["roots"], '[')
	}
	return false
}

func isKind(v json.RawMessage, c byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == c
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// millis turns a duration into whole milliseconds, at least one.
func millis(d time.Duration) time.Duration {
	d = d.Round(time.Millisecond)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}
