package mcpwire

// This file is the wire contract's vocabulary, kept once as net/http keeps
// its status codes: the JSON-RPC codes mrtr answers with, the one message
// of a rejected requestState, and the methods that may pause. The root
// package re-exports what is public; gosdk, mcpgo, the proxy and the
// observers read it from here. What error a guard rejection becomes is
// decided in internal/adapt/wire.go, with these codes.

// JSON-RPC error codes of the wire contract.
const (
	// CodeParseError: the body is not JSON (JSON-RPC 2.0).
	CodeParseError = -32700
	// CodeInvalidRequest: the body is JSON but no acceptable JSON-RPC
	// message (JSON-RPC 2.0).
	CodeInvalidRequest = -32600
	// CodeInvalidParams: a rejected requestState, arguments the hash
	// refuses, malformed inputResponses (JSON-RPC 2.0).
	CodeInvalidParams = -32602
	// CodeInternalError: a single-use store outage, an upstream failure
	// (JSON-RPC 2.0).
	CodeInternalError = -32603
	// CodeHeaderMismatch: a request whose MCP headers disagree with its
	// body (MCP 2026-07-28, Streamable HTTP).
	CodeHeaderMismatch = -32020
	// CodeMissingCapability: a request that needs a client capability the
	// client did not declare (MCP 2026-07-28).
	CodeMissingCapability = -32021
)

// RejectMessage is the one fixed message of every rejected requestState;
// the reason travels in data.reason.
const RejectMessage = "invalid requestState"

// MissingCapabilityMessage is the message of a CodeMissingCapability error.
const MissingCapabilityMessage = "missing required client capability"

// InternalMessage is the generic message of a CodeInternalError the
// server answers without saying why (the log says why).
const InternalMessage = "internal error"

// StoreUnavailableMessage is the message of the CodeInternalError a
// resume gets when the single-use store cannot decide (down, too slow,
// its replicas short of acknowledging): fixed, so it tells a caller to
// try again and nothing of why (the log says why). That the store is
// down is no secret: /readyz says it to anyone who asks.
const StoreUnavailableMessage = "the single-use store is unavailable; try again"

// NullResponsesMessage is the message of the CodeInvalidParams error for
// inputResponses that are not an object of answers (null, {}, or no
// object at all).
const NullResponsesMessage = "invalid params: inputResponses must be an object of answers"

// The methods whose results may be input_required (MCP 2026-07-28).
const (
	MethodCallTool     = "tools/call"
	MethodGetPrompt    = "prompts/get"
	MethodReadResource = "resources/read"
)

// The list methods, whose complete results carry ttlMs and cacheScope in
// 2026-07-28 (as resources/read's do).
const (
	MethodListTools             = "tools/list"
	MethodListPrompts           = "prompts/list"
	MethodListResources         = "resources/list"
	MethodListResourceTemplates = "resources/templates/list"
)

// Pausable reports whether method is one of the three that may pause.
func Pausable(method string) bool {
	return method == MethodCallTool || method == MethodGetPrompt || method == MethodReadResource
}

// TargetParam is the member of a pausable method's params that names
// what the call is bound to (its token's target, its Mcp-Name header):
// "uri" for resources/read, "name" for tools/call and prompts/get, and ""
// for any other method.
func TargetParam(method string) string {
	switch method {
	case MethodCallTool, MethodGetPrompt:
		return "name"
	case MethodReadResource:
		return "uri"
	}
	return ""
}
