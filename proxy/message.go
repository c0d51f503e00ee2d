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

var errNotObject = errors.New("not a JSON object")

// object is a JSON object read from untrusted input, members by exact
// name (encoding/json's map decoding: no case folding; of repeated names
// the last wins, and the proxy forwards only what it decoded, so the
// upstream cannot read a member the proxy did not see).
type object map[string]json.RawMessage

func parseObject(b []byte) (object, error) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return nil, errNotObject
	}
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errNotObject
	}
	return o, nil
}

// str returns member k as a string; ok is false when it is absent or not
// a string.
func (o object) str(k string) (string, bool) {
	raw, ok := o[k]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
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
		kb, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		buf.Write(kb)
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
		raw, ok := msg["params"]
		if !ok {
			return nil, errBadRequest
		}
		if r.params, err = parseObject(raw); err != nil {
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
	if raw, ok := msg["result"]; ok {
		if r.result, err = parseObject(raw); err != nil {
			return nil, errNotResponse
		}
	}
	return r, nil
}

func (r *rpcResponse) inputRequired() bool {
	t, _ := r.result.str("resultType")
	return r.result != nil && t == "input_required"
}
