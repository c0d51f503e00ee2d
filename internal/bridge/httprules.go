package bridge

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// The Streamable HTTP rules of MCP 2026-07-28 that an HTTP server applies
// itself before a message reaches its MCP layer, and that a stdio child
// cannot: it sees no headers. Direct applies them in the child's place,
// as go-sdk's StreamableHTTPHandler does (mcp/streamable.go servePOST and
// mcp/streamable_headers.go). The proxy in front already refuses a header
// that is present and disagrees with the body (proxy/header.go); these are
// the rules about headers that are absent, the custom Mcp-Param-* headers
// and the request _meta.

// JSON-RPC codes of the rules.
const (
	codeInvalidParams      = -32602
	codeHeaderMismatch     = -32020
	codeUnsupportedVersion = -32022
)

// refusal is a message Direct answers itself, with its HTTP status.
type refusal struct {
	status  int
	code    int
	message string
	data    json.RawMessage
}

// transportRules judges one message and its header before the child sees
// it; nil means it may go to the child. tool returns the inputSchema of a
// tool the child lists (ok false when it lists none of that name); it is
// called only for a tools/call that passes every other rule.
func transportRules(h http.Header, m *rpc.Message, params mcpwire.Object, tool func(name string) (json.RawMessage, bool)) *refusal {
	headerVersion := h.Get("Mcp-Protocol-Version")
	modern := headerVersion >= ModernVersion
	var metaVersion string
	if meta, ok := params.Object("_meta"); ok {
		metaVersion, _ = meta.String(mcpwire.MetaProtocolVersion)
	}
	if m.ID != nil {
		switch {
		case metaVersion != "" && headerVersion == "":
			return &refusal{http.StatusBadRequest, codeHeaderMismatch, "header mismatch: the Mcp-Protocol-Version header is required for requests carrying " + mcpwire.MetaProtocolVersion, nil}
		case metaVersion == "" && modern:
			return &refusal{http.StatusBadRequest, codeInvalidParams, "invalid params: missing or invalid _meta field " + mcpwire.MetaProtocolVersion, nil}
		case metaVersion == "":
			// A 2025-11-25 client (no _meta, no header or an older one):
			// the child is shared and speaks 2026-07-28 only, so its
			// session must never see an initialize or a legacy call.
			data, _ := json.Marshal(struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested,omitempty"`
			}{[]string{ModernVersion}, headerVersion})
			return &refusal{http.StatusBadRequest, codeUnsupportedVersion, "unsupported protocol version: this endpoint serves MCP " + ModernVersion + " only", data}
		}
	}
	if !modern {
		return nil
	}
	if len(h.Values("Mcp-Method")) == 0 {
		return mismatch("the Mcp-Method header is required")
	}
	key := mcpwire.TargetParam(m.Method)
	if key == "" {
		return nil
	}
	if len(h.Values("Mcp-Name")) == 0 {
		return mismatch("the Mcp-Name header is required for " + m.Method)
	}
	name, ok := params.String(key)
	if !ok {
		return mismatch("the Mcp-Name header has no params." + key + " to match")
	}
	if m.Method != mcpwire.MethodCallTool {
		return nil
	}
	schema, ok := tool(name)
	if !ok {
		return nil // the child answers for a tool it does not have
	}
	if why := paramHeaders(h, params["arguments"], schema); why != "" {
		return mismatch(why)
	}
	return nil
}

func mismatch(why string) *refusal {
	return &refusal{http.StatusBadRequest, codeHeaderMismatch, "header mismatch: " + why, nil}
}

// headerBinding is one x-mcp-header annotation of an inputSchema: the
// argument at path travels in the header Mcp-Param-<header> too.
type headerBinding struct {
	path   []string
	header string
}

type schemaProperty struct {
	XMCPHeader json.RawMessage           `json:"x-mcp-header,omitempty"`
	Properties map[string]schemaProperty `json:"properties,omitempty"`
}

// headerBindings reads the x-mcp-header annotations of an inputSchema, at
// any depth of its properties.
func headerBindings(schema json.RawMessage) []headerBinding {
	var s schemaProperty
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return collectBindings(s.Properties, nil, nil)
}

func collectBindings(props map[string]schemaProperty, prefix []string, out []headerBinding) []headerBinding {
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(p.XMCPHeader, &header) == nil && header != "" {
			out = append(out, headerBinding{path: path, header: header})
		}
		out = collectBindings(p.Properties, path, out)
	}
	return out
}

// paramHeaders checks the Mcp-Param-* headers of a tools/call against its
// arguments, as SEP-2243 has a server do: a header for every annotated
// argument present and not null, with its value (the sentinel base64 form
// decoded), and none for an argument that is absent or null. It returns
// why they disagree, or "".
func paramHeaders(h http.Header, args, schema json.RawMessage) string {
	bindings := headerBindings(schema)
	if len(bindings) == 0 {
		return ""
	}
	for _, b := range bindings {
		name := "Mcp-Param-" + b.header
		values := h.Values(name)
		arg, present := argument(args, b.path)
		if !present || string(arg) == "null" {
			if len(values) > 0 {
				return "unexpected " + name + " header for an absent or null argument"
			}
			continue
		}
		switch {
		case len(values) == 0:
			return "missing " + name + " header for argument " + strings.Join(b.path, ".")
		case len(values) > 1:
			return name + " header sent more than once"
		}
		v, ok := decodeHeaderValue(values[0])
		if !ok {
			return name + " header is not valid base64"
		}
		if !primitiveEqual(v, arg) {
			return name + " header does not match the argument"
		}
	}
	return ""
}

// argument is the raw value at path in the arguments object.
func argument(args json.RawMessage, path []string) (json.RawMessage, bool) {
	cur := args
	for _, k := range path {
		var o map[string]json.RawMessage
		if json.Unmarshal(cur, &o) != nil {
			return nil, false
		}
		v, ok := o[k]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// decodeHeaderValue decodes the sentinel form =?base64?<standard base64>?=
// (padding required); any other value is itself.
func decodeHeaderValue(v string) (string, bool) {
	const prefix, suffix = "=?base64?", "?="
	inner, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, suffix)
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// maxSafeInteger bounds the integers a header may carry (those an IEEE
// double holds exactly).
const maxSafeInteger = 1<<53 - 1

// primitiveEqual reports whether header value v carries the JSON value
// arg: a string as is, a boolean as true or false, an integer in the safe
// range as a number of the same value. Any other JSON value matches no
// header.
func primitiveEqual(v string, arg json.RawMessage) bool {
	var val any
	if json.Unmarshal(arg, &val) != nil {
		return false
	}
	switch a := val.(type) {
	case string:
		return v == a
	case bool:
		return v == strconv.FormatBool(a)
	case float64:
		if a != math.Trunc(a) || math.Abs(a) > maxSafeInteger {
			return false
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
			return false
		}
		return f == a
	}
	return false
}
