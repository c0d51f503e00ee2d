package adapt

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// StripBadState reads a JSON-RPC request body for a requestState that
// cannot be a token: a member of a pausable request's params named
// requestState (in any case, as the SDKs' decoders match names) whose
// value is neither a string nor null. The SDKs fail to decode such a
// request before any handler runs, each with an error of its own (go-sdk
// a -32020 header mismatch, mcp-go a -32600), where the error contract
// prescribes the guard's rejection: an HTTP front end strips the member,
// passes the rest on, and marks the call (Call.BadState), so the guard
// refuses it as ReasonInvalid, logged and observed as every rejection.
// A null member is no state, as for the guard: it stays.
//
// It returns the body without those members and true, or body itself and
// false (for every body that is not one such request, valid JSON or not:
// the SDK then answers it as it would).
func StripBadState(body []byte) ([]byte, bool) {
	if bytes.IndexByte(body, '\\') < 0 && !containsFold(body, "requeststate") {
		return body, false // no member of that name, in any spelling
	}
	b := mcpwire.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return body, false
	}
	m, _ := mcpwire.Member(b, "method")
	if method, ok := mcpwire.StringValue(m); !ok || !mcpwire.Pausable(method) {
		return body, false
	}
	praw, _ := mcpwire.Member(b, "params")
	if len(praw) == 0 || praw[0] != '{' {
		return body, false
	}
	bad := false
	for k, v := range mcpwire.Members(praw) {
		if isBadState(k, v) {
			bad = true
			break
		}
	}
	if !bad {
		return body, false // the common resume: a string state, no map built
	}
	params := mcpwire.SplitObject(praw)
	for k, v := range params {
		if isBadState(k, v) {
			delete(params, k)
		}
	}
	top := mcpwire.SplitObject(b)
	var err error
	if top["params"], err = params.Encode(); err != nil {
		return body, false
	}
	out, err := top.Encode()
	if err != nil {
		return body, false
	}
	return out, true
}

// isBadState reports whether the params member k: v is a requestState, in
// any case, that is neither a string nor null.
func isBadState(k string, v []byte) bool {
	return strings.EqualFold(k, "requestState") && v[0] != '"' && string(v) != "null"
}

// containsFold reports whether b holds lower (lower-case ASCII) in any
// case, without allocating.
func containsFold(b []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(b); i++ {
		if b[i]|0x20 != lower[0] {
			continue
		}
		j := 1
		for j < len(lower) && b[i+j]|0x20 == lower[j] {
			j++
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}
