package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// The three methods whose results may be input_required (MCP 2026-07-28).
const (
	methodCallTool     = "tools/call"
	methodGetPrompt    = "prompts/get"
	methodReadResource = "resources/read"
	methodListen       = "subscriptions/listen"
)

func pausable(method string) bool {
	return method == methodCallTool || method == methodGetPrompt || method == methodReadResource
}

var (
	errNotObject = errors.New("not a JSON object")
	errSyntax    = errors.New("invalid JSON")
)

// object is a JSON object read from untrusted input, members by exact
// name (no case folding; of repeated names the last wins, as in
// encoding/json, and the proxy forwards only what it parsed, so the
// upstream cannot read a member the proxy did not see). Member values are
// raw JSON, sub-slices of the parsed input.
type object map[string]json.RawMessage

// parseObject validates b as one JSON value (encoding/json's scanner, no
// allocation) and splits it into members if it is an object.
func parseObject(b []byte) (object, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errNotObject
	}
	if !json.Valid(b) {
		return nil, errSyntax
	}
	return splitObject(b), nil
}

// obj returns member k as an object, without validating it again: the
// members of a parsed object are valid JSON.
func (o object) obj(k string) (object, bool) {
	raw := o[k]
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	return splitObject(raw), true
}

// splitObject splits b, one valid JSON object with no surrounding space,
// into its members.
func splitObject(b []byte) object {
	o := make(object, 8)
	i := 1
	for {
		i = skipSpace(b, i)
		if b[i] == '}' {
			return o
		}
		kEnd := skipString(b, i)
		key := unquote(b[i:kEnd])
		i = skipSpace(b, kEnd) + 1 // ':'
		i = skipSpace(b, i)
		vEnd := skipValue(b, i)
		o[key] = b[i:vEnd:vEnd]
		i = skipSpace(b, vEnd)
		if b[i] == ',' {
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// unquote decodes a valid JSON string literal as encoding/json does
// (invalid UTF-8 becomes U+FFFD), with a fast path for plain ASCII.
func unquote(raw []byte) string {
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return intern(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// intern returns the member names every message repeats without
// allocating (a switch on string(b) does not copy b).
func intern(b []byte) string {
	switch string(b) {
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "name":
		return "name"
	case "uri":
		return "uri"
	case "arguments":
		return "arguments"
	case "_meta":
		return "_meta"
	case "requestState":
		return "requestState"
	case "inputResponses":
		return "inputResponses"
	case "inputRequests":
		return "inputRequests"
	case "result":
		return "result"
	case "error":
		return "error"
	case "resultType":
		return "resultType"
	case "content":
		return "content"
	case "input_required":
		return "input_required"
	case "complete":
		return "complete"
	case "tools/call":
		return "tools/call"
	case "2026-07-28":
		return "2026-07-28"
	case "io.modelcontextprotocol/protocolVersion":
		return "io.modelcontextprotocol/protocolVersion"
	case "io.modelcontextprotocol/clientCapabilities":
		return "io.modelcontextprotocol/clientCapabilities"
	case "io.modelcontextprotocol/clientInfo":
		return "io.modelcontextprotocol/clientInfo"
	}
	return string(b)
}

// str returns member k as a string; ok is false when it is absent or not
// a string.
func (o object) str(k string) (string, bool) {
	raw, ok := o[k]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw), true
}

// has reports whether member k is present and not null.
func (o object) has(k string) bool {
	raw, ok := o[k]
	return ok && !bytes.Equal(raw, []byte("null"))
}

// encode writes o as compact JSON without HTML escaping, so raw members
// (the upstream's own requestState among them) leave byte for byte.
func (o object) encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(o.size())
	buf.WriteByte('{')
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeString(&buf, k); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		buf.Write(o[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func (o object) size() int {
	n := 2
	for k, v := range o {
		n += len(k) + len(v) + 4
	}
	return n
}

// writeString writes s as a JSON string, without HTML escaping.
func writeString(buf *bytes.Buffer, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, err := marshalNoEscape(s)
			buf.Write(b)
			return err
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// rpcRequest is what the proxy reads of one client POST body: the
// envelope and, for the pausable methods, the params.
type rpcRequest struct {
	msg    object
	id     json.RawMessage // nil for a notification or a response
	method string
	params object // nil when absent
}

var errBadRequest = errors.New("not a JSON-RPC message")

// parseRequest reads a client's POST body. It accepts any JSON-RPC object
// (request, notification or a legacy client's response); a batch or
// anything else is an error.
func parseRequest(body []byte) (*rpcRequest, error) {
	msg, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	r := &rpcRequest{msg: msg}
	if id, ok := msg["id"]; ok && !bytes.Equal(id, []byte("null")) {
		if id[0] != '"' && (id[0] < '0' || id[0] > '9') && id[0] != '-' {
			return nil, errBadRequest
		}
		r.id = id
	}
	if _, ok := msg["method"]; ok {
		m, ok := msg.str("method")
		if !ok {
			return nil, errBadRequest
		}
		r.method = m
	}
	if pausable(r.method) && r.id != nil {
		var ok bool
		if r.params, ok = msg.obj("params"); !ok {
			return nil, errBadRequest
		}
	}
	return r, nil
}

// target is the name or URI a pausable call is bound to.
func (r *rpcRequest) target() (string, bool) {
	if r.method == methodReadResource {
		return r.params.str("uri")
	}
	return r.params.str("name")
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

func parseResponse(b []byte) (*rpcResponse, error) {
	msg, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	if !isResponse(msg) {
		return nil, errNotResponse
	}
	r := &rpcResponse{msg: msg}
	if _, ok := msg["result"]; ok {
		if r.result, ok = msg.obj("result"); !ok {
			return nil, errNotResponse
		}
	}
	return r, nil
}

func (r *rpcResponse) inputRequired() bool {
	t, _ := r.result.str("resultType")
	return r.result != nil && t == "input_required"
}
