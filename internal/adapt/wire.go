package adapt

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// This file decides which JSON-RPC error each of mrtr's errors becomes on
// the wire, for every front end (gosdk, mcpgo, the proxy, the bridge). The
// codes and fixed messages themselves live in internal/mcpwire/codes.go.

// WireError is a JSON-RPC error of the error contract, as a front end
// sends it: its SDK's error type (or the proxy's JSON) is built from these
// three members.
type WireError struct {
	Code    int
	Message string
	Data    json.RawMessage // nil for none
}

func (e *WireError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("%s (%d, %s)", e.Message, e.Code, e.Data)
	}
	return fmt.Sprintf("%s (%d)", e.Message, e.Code)
}

// Wire returns the JSON-RPC error the error contract prescribes for err,
// or nil when err is not one of mrtr's (an adapter then sends it as its
// SDK sends any handler error; the proxy as InternalError, see WireOrInternal).
func Wire(err error) *WireError {
	var we *WireError
	var re *mrtr.RejectError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return we
	case errors.As(err, &re):
		return &WireError{Code: mcpwire.CodeInvalidParams, Message: mcpwire.RejectMessage, Data: reasonData(re.Reason)}
	case errors.Is(err, mrtr.ErrStoreUnavailable):
		// The server cannot keep its single-use promise now: the client
		// learns that it may try again, nothing of why; the log says why.
		return storeUnavailable
	case errors.Is(err, reqstate.ErrNoSealingKey), errors.Is(err, mrtr.ErrAudit):
		// No key whose window is open, or the audit trail required and
		// not written: the client learns nothing of why, the log does.
		return Internal
	case errors.Is(err, mrtr.ErrInvalidArguments):
		return &WireError{Code: mcpwire.CodeInvalidParams, Message: argumentsMessage(err)}
	case errors.Is(err, mrtr.ErrInvalidResponses):
		return invalidResponses
	case errors.Is(err, mrtr.ErrHandlerState):
		return &WireError{Code: mcpwire.CodeInternalError, Message: "server bug: a handler set requestState without sealing it"}
	}
	return nil
}

// WireOrInternal is Wire with every other error as Internal: for a front
// end that has no SDK to send other errors its own way.
func WireOrInternal(err error) *WireError {
	if we := Wire(err); we != nil {
		return we
	}
	return Internal
}

// Internal is the generic -32603 error: the client learns nothing of why.
var Internal = &WireError{Code: mcpwire.CodeInternalError, Message: mcpwire.InternalMessage}

var storeUnavailable = &WireError{Code: mcpwire.CodeInternalError, Message: mcpwire.StoreUnavailableMessage}

var invalidResponses = &WireError{Code: mcpwire.CodeInvalidParams, Message: mcpwire.NullResponsesMessage}

// reasonData is the data of a rejection: {"reason": r}.
func reasonData(r mrtr.Reason) json.RawMessage {
	data, _ := json.Marshal(map[string]string{"reason": string(r)})
	return data
}

// argumentsMessage names the rule that arguments the hash refuses broke,
// never their content.
func argumentsMessage(err error) string {
	if errors.Is(err, reqstate.ErrFoldedNames) {
		return "invalid params: arguments hold an object with two member names that differ only in case " +
			"(such as id and ID), which a decoder matching names case-insensitively would bind to one field"
	}
	if errors.Is(err, reqstate.ErrInexactNumber) {
		return "invalid params: arguments hold a number with more precision than an IEEE 754 double carries " +
			"(I-JSON, RFC 7493); send large integers and exact decimals as strings"
	}
	return fmt.Sprintf("invalid params: arguments are not I-JSON (RFC 7493): no duplicate member names, "+
		"no lone surrogates or invalid UTF-8, at most %d levels of nesting", reqstate.MaxJSONDepth)
}

// MissingCapabilities returns the -32021 error whose
// data.requiredCapabilities names capabilities ("elicitation.form",
// "sampling", ...).
func MissingCapabilities(capabilities ...string) *WireError {
	return &WireError{Code: mcpwire.CodeMissingCapability, Message: mcpwire.MissingCapabilityMessage,
		Data: mcpwire.MissingCapabilityData(capabilities...)}
}
