package mcpwire

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// CodeMissingCapability is the JSON-RPC code of a request that needs a
// client capability the client did not declare (MCP 2026-07-28).
const CodeMissingCapability = -32021

// MissingCapabilityMessage is the message of a CodeMissingCapability error.
const MissingCapabilityMessage = "missing required client capability"

// MetaClientCapabilities is the _meta key under which a 2026-07-28 request
// declares its client's capabilities.
const MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// MetaProtocolVersion is the _meta key of a 2026-07-28 request's protocol
// version.
const MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// Caps is what a client declared it can answer: the part of its
// ClientCapabilities the capability gate needs. The zero value declares
// nothing.
type Caps struct {
	ElicitForm    bool // elicitation (form mode): {"elicitation":{}} or {"elicitation":{"form":{}}}
	ElicitURL     bool // elicitation URL mode: {"elicitation":{"url":{}}}
	Sampling      bool // sampling/createMessage
	SamplingTools bool // sampling with tools: {"sampling":{"tools":{}}}
	Roots         bool // roots/list
}

// ParseCaps reads a ClientCapabilities JSON object. Anything that is not
// an object declares nothing; a member that is not an object does not
// declare its capability.
func ParseCaps(raw json.RawMessage) Caps {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return Caps{}
	}
	return capsOf(raw)
}

// capsOf reads a valid ClientCapabilities object.
func capsOf(raw []byte) Caps {
	var c Caps
	if e, ok := member(raw, "elicitation"); ok && e[0] == '{' {
		_, form := member(e, "form")
		_, url := member(e, "url")
		c.ElicitForm = form || !url
		c.ElicitURL = url
	}
	if s, ok := member(raw, "sampling"); ok && s[0] == '{' {
		c.Sampling = true
		_, c.SamplingTools = member(s, "tools")
	}
	if r, ok := member(raw, "roots"); ok && r[0] == '{' {
		c.Roots = true
	}
	return c
}

// CapsFromMeta reads the capabilities a request declares in its params'
// _meta object (meta is the value of params._meta); absent means none.
func CapsFromMeta(meta json.RawMessage) Caps {
	meta = bytes.TrimSpace(meta)
	if len(meta) == 0 || meta[0] != '{' || !json.Valid(meta) {
		return Caps{}
	}
	caps, ok := member(meta, MetaClientCapabilities)
	if !ok || caps[0] != '{' {
		return Caps{}
	}
	return capsOf(caps)
}

// The methods of the three input request kinds.
const (
	MethodElicit    = "elicitation/create"
	MethodSampling  = "sampling/createMessage"
	MethodListRoots = "roots/list"
)

// Required names the capability an input request needs that c lacks, as
// a path like "elicitation.url", or returns "" when c has it. method and
// params are the input request's members. An unknown method is
// Unvettable: no declaration covers it, so it is never passed on.
func Required(c Caps, method string, params json.RawMessage) string {
	switch method {
	case MethodElicit:
		p := validObject(params) // a malformed body is judged as form mode
		mode := stringMember(p, "mode")
		url := stringMember(p, "url")
		if mode == "url" || (mode == "" && url != "") {
			if !c.ElicitURL {
				return "elicitation.url"
			}
			return ""
		}
		if !c.ElicitForm {
			return "elicitation.form"
		}
	case MethodSampling:
		if !c.Sampling {
			return "sampling"
		}
		tools, _ := member(validObject(params), "tools")
		if len(tools) > 2 && tools[0] == '[' &&
			len(bytes.TrimSpace(tools[1:len(tools)-1])) > 0 && !c.SamplingTools {
			return "sampling.tools"
		}
	case MethodListRoots:
		if !c.Roots {
			return "roots"
		}
	default:
		return Unvettable
	}
	return ""
}

// Unvettable is what Required and Missing name for an input request that
// no capability can cover: an unknown method, or an entry that is not a
// {method, params} object. A caller should treat it as a protocol error
// of whoever produced the request, not as a client's missing capability.
const Unvettable = "invalid"

// Missing returns, sorted and without repeats, the capabilities c lacks
// for reqs (the raw inputRequests entries by key). An entry that is not a
// {method, params} object is reported as "invalid".
func Missing(c Caps, reqs map[string]json.RawMessage) []string {
	var need map[string]bool // allocated only when something is missing
	for _, raw := range reqs {
		name := Unvettable
		if r := validObject(raw); r != nil {
			if method := stringMember(r, "method"); method != "" {
				params, _ := member(r, "params")
				name = Required(c, method, params)
			}
		}
		if name != "" {
			if need == nil {
				need = map[string]bool{}
			}
			need[name] = true
		}
	}
	if len(need) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(need))
}

// MissingCapabilityData returns the data of a -32021 error:
// {"requiredCapabilities": ClientCapabilities} holding the named
// capabilities ("elicitation", "elicitation.form", "elicitation.url",
// "sampling", "sampling.tools", "roots", or any other path).
func MissingCapabilityData(capabilities ...string) json.RawMessage {
	req := map[string]map[string]any{}
	for _, c := range capabilities {
		top, sub, _ := strings.Cut(c, ".")
		m := req[top]
		if m == nil {
			m = map[string]any{}
			req[top] = m
		}
		if sub != "" {
			m[sub] = map[string]any{}
		}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": req})
	return data
}

// validObject returns raw, trimmed, if it is one valid JSON object, and
// nil otherwise.
func validObject(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil
	}
	return raw
}

// stringMember returns member key of a valid object as a string, "" when
// absent or not a string.
func stringMember(obj []byte, key string) string {
	if obj == nil {
		return ""
	}
	v, ok := member(obj, key)
	if !ok || v[0] != '"' {
		return ""
	}
	return unquote(v)
}
