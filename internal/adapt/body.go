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
	if bytes.IndexByte(body, '\\') < 0 && plainStates(body) {
		// No member of that name in any spelling, or each one a string or
		// null (the common resume): nothing to strip, and the body is not
		// validated or parsed here.
		return body, false
	}
	return stripBadState(body)
}

// stripBadState is StripBadState on the parsed body.
func stripBadState(body []byte) ([]byte, bool) {
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

// plainStates reports, for body without a backslash, whether every
// "requestState" in it (in any case, quotes included) that is followed by
// a colon is followed by a string or null: then no member of that name,
// anywhere in the body, has any other value, and StripBadState has
// nothing to strip. Without a backslash a member's name is written as it
// reads, so every member named requestState is one of the places looked
// at; a place that is not a member (inside a string) can only send the
// body to the full reading. A body that is not JSON gets the answer the
// full reading gives it too: nothing stripped. A body with a long s
// anywhere goes to the full reading.
func plainStates(body []byte) bool {
	const name = `"requeststate"`
	const q = 3 // the index of name's one q
	if bytes.Contains(body, []byte(longS)) {
		// A name may fold to requestState through the one letter outside
		// ASCII that folds to one of its letters (the long s, U+017F, to
		// s), as the SDKs' decoders match names: only the full reading
		// sees it.
		return false
	}
	// Every place is found by its q, in either case: a rare letter in a
	// request, so bytes.IndexByte skips most of the body at once (the
	// order the places are looked at in does not change the answer).
	for _, c := range [...]byte{'q', 'Q'} {
		for from := 0; ; {
			k := bytes.IndexByte(body[from:], c)
			if k < 0 {
				break
			}
			i := from + k - q
			from += k + 1
			if !foldedAt(body, i, name) {
				continue
			}
			j := skipJSONSpace(body, i+len(name))
			if j == len(body) || body[j] != ':' {
				continue // not a member's name
			}
			j = skipJSONSpace(body, j+1)
			if j < len(body) && (body[j] == '"' || bytes.HasPrefix(body[j:], []byte("null"))) {
				continue
			}
			return false
		}
	}
	return true
}

// foldedAt reports whether b holds lower (lower-case ASCII) at i, its
// letters in any case.
func foldedAt(b []byte, i int, lower string) bool {
	if i < 0 || i+len(lower) > len(b) {
		return false
	}
	for k := 0; k < len(lower); k++ {
		c, l := b[i+k], lower[k]
		if c != l && (c|0x20 != l || l < 'a' || l > 'z') {
			return false
		}
	}
	return true
}

// skipJSONSpace returns the index of the first byte at or after i in b
// that is not JSON whitespace.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// longS is U+017F, LATIN SMALL LETTER LONG S, in UTF-8: under Unicode
// simple folding the only letter outside ASCII equal to a letter of
// "requestState" (TestFoldsToRequestState).
const longS = "\u017f"
