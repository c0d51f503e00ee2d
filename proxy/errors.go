package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// errorBody is a JSON-RPC error response; a nil id is sent as null.
func errorBody(id json.RawMessage, code int, message string, data json.RawMessage) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}{code, message, data}
	b, _ := mcpwire.MarshalNoEscape(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, e})
	return b
}

func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string, data json.RawMessage) {
	writeJSON(w, status, errorBody(id, code, message, data))
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// guardErrorBody is the error contract's answer to a guard error
// (internal/adapt/wire.go decides which): -32602 with the fixed message
// and data.reason for a rejected requestState, -32603 with a fixed
// message for a store outage (try again), a generic one for anything else.
func guardErrorBody(id json.RawMessage, err error) []byte {
	we := adapt.WireOrInternal(err)
	return errorBody(id, we.Code, we.Message, we.Data)
}

func writeGuardError(w http.ResponseWriter, id json.RawMessage, err error) {
	writeJSON(w, http.StatusOK, guardErrorBody(id, err))
}
