package mcpwire

import (
	"encoding/json"
	"iter"
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
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return Caps{}
	}
	return CapsFromValue(v)
}

// CapsFromValue reads a ClientCapabilities object already decoded by
// encoding/json (a map[string]any), as an SDK hands out a request's _meta.
// It is the one reading of a declaration that ParseCaps and every adapter
// share.
func CapsFromValue(v any) Caps {
	m, _ := v.(map[string]any)
	var c Caps
	if e, ok := m["elicitation"].(map[string]any); ok {
		_, form := e["form"]
		_, url := e["url"]
		c.ElicitForm = form || !url
		c.ElicitURL = url
	}
	if s, ok := m["sampling"].(map[string]any); ok {
		c.Sampling = true
		_, c.SamplingTools = s["tools"]
	}
	_, c.Roots = m["roots"].(map[string]any)
	return c
}

// CapsFromMeta reads the capabilities a request declares in its params'
// _meta object (raw is the value of params._meta); absent means none.
func CapsFromMeta(meta json.RawMessage) Caps {
	m, ok := object(meta)
	if !ok {
		return Caps{}
	}
	return ParseCaps(m[MetaClientCapabilities])
}

func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// The methods of the three input request kinds.
const (
	MethodElicit    = "elicitation/create"
	MethodSampling  = "sampling/createMessage"
	MethodListRoots = "roots/list"
)

// Need is an input request as the capability gate sees it: its method,
// and for elicitation and sampling the one fact that needs a finer
// capability. An adapter builds it from its SDK's typed request; Required
// builds it from raw JSON.
type Need struct {
	Method  string // MethodElicit, MethodSampling or MethodListRoots
	URLMode bool   // an elicitation in URL mode (mode "url", or a url without a mode)
	Tools   bool   // a sampling request that offers tools
}

// Lacks names the capability n needs that c does not declare, as a path
// like "elicitation.url", or returns "" when c has it. An unknown method
// is Unvettable.
func (c Caps) Lacks(n Need) string {
	switch n.Method {
	case MethodElicit:
		if n.URLMode {
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
		if n.Tools && !c.SamplingTools {
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

// LacksAny returns, sorted and without repeats, the capabilities c lacks
// for needs; nil when it has them all.
func (c Caps) LacksAny(needs iter.Seq[Need]) []string {
	var lack map[string]bool // allocated only when something is missing
	for n := range needs {
		if name := c.Lacks(n); name != "" {
			if lack == nil {
				lack = map[string]bool{}
			}
			lack[name] = true
		}
	}
	if len(lack) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(lack))
}

// Required names the capability an input request needs that c lacks, as
// a path like "elicitation.url", or returns "" when c has it. method and
// params are the input request's members. An unknown method is
// Unvettable: no declaration covers it, so it is never passed on.
func Required(c Caps, method string, params json.RawMessage) string {
	return c.Lacks(NeedOf(method, params))
}

// NeedOf reads the Need of an input request from its raw members.
func NeedOf(method string, params json.RawMessage) Need {
	n := Need{Method: method}
	switch method {
	case MethodElicit:
		var p struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		}
		_ = json.Unmarshal(params, &p) // a malformed body is judged as form mode
		n.URLMode = p.Mode == "url" || (p.Mode == "" && p.URL != "")
	case MethodSampling:
		var p struct {
			Tools []json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(params, &p)
		n.Tools = len(p.Tools) > 0
	}
	return n
}

// Unvettable is what Required and Missing name for an input request that
// no capability can cover: an unknown method, or an entry that is not a
// {method, params} object. A caller should treat it as a protocol error
// of whoever produced the request, not as a client's missing capability.
const Unvettable = "invalid"

// InputRequest is one entry of an input_required result's inputRequests.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Missing returns, sorted and without repeats, the capabilities c lacks
// for reqs (the raw inputRequests entries by key). An entry that is not a
// {method, params} object is reported as "invalid".
func Missing(c Caps, reqs map[string]json.RawMessage) []string {
	return c.LacksAny(func(yield func(Need) bool) {
		for _, raw := range reqs {
			var r InputRequest
			n := Need{Method: Unvettable}
			if err := json.Unmarshal(raw, &r); err == nil && r.Method != "" {
				n = NeedOf(r.Method, r.Params)
			}
			if !yield(n) {
				return
			}
		}
	})
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
