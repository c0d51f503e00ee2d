package mcpwire

import (
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"
)

// MetaClientCapabilities is the _meta key under which a 2026-07-28 request
// declares its client's capabilities.
const MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// MetaClientInfo is the _meta key under which a 2026-07-28 request
// carries the client's clientInfo ({name, version}), which a 2025-11-25
// client sends only at initialize.
const MetaClientInfo = "io.modelcontextprotocol/clientInfo"

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
	raw = TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return Caps{}
	}
	return capsOf(raw)
}

// capsOf reads a valid ClientCapabilities object.
func capsOf(raw []byte) Caps {
	return readCaps(func(key, sub string) (present, object bool) {
		v, ok := member(raw, key)
		if !ok || v[0] != '{' || sub == "" {
			return ok, ok && v[0] == '{'
		}
		if v, ok = member(v, sub); !ok || v[0] != '{' {
			return ok, false
		}
		return true, true
	})
}

// CapsFromValue reads a ClientCapabilities object already decoded by
// encoding/json (a map[string]any), as an SDK hands out a request's _meta.
func CapsFromValue(v any) Caps {
	return readCaps(func(key, sub string) (present, object bool) {
		m, isObj := v.(map[string]any)
		if !isObj {
			return false, false
		}
		cur, present := m[key]
		if !present {
			return false, false
		}
		if sub != "" {
			if m, isObj = cur.(map[string]any); !isObj {
				return false, false
			}
			if cur, present = m[sub]; !present {
				return false, false
			}
		}
		_, object = cur.(map[string]any)
		return true, object
	})
}

// readCaps is the one reading of a declaration, over lookup, which reports
// whether the member key (its member sub, unless sub is empty) is present
// and whether it is an object. A capability counts only as an object; an
// empty elicitation object declares form mode. The path is two strings,
// not a variadic slice, so that a lookup through the func value allocates
// nothing.
func readCaps(lookup func(key, sub string) (present, object bool)) Caps {
	var c Caps
	if _, obj := lookup("elicitation", ""); obj {
		form, _ := lookup("elicitation", "form")
		url, _ := lookup("elicitation", "url")
		c.ElicitForm = form || !url
		c.ElicitURL = url
	}
	if _, obj := lookup("sampling", ""); obj {
		c.Sampling = true
		c.SamplingTools, _ = lookup("sampling", "tools")
	}
	_, c.Roots = lookup("roots", "")
	return c
}

// CapsFromMeta reads the capabilities a request declares in its params'
// _meta object (meta is the value of params._meta); absent means none.
func CapsFromMeta(meta json.RawMessage) Caps {
	meta = TrimSpace(meta)
	if len(meta) == 0 || meta[0] != '{' || !json.Valid(meta) {
		return Caps{}
	}
	return capsFromValidMeta(meta)
}

// CapsFromParsedMeta is CapsFromMeta for a member of a parsed Object
// (valid JSON already): it does not validate it again.
func CapsFromParsedMeta(meta json.RawMessage) Caps {
	if len(meta) == 0 || meta[0] != '{' {
		return Caps{}
	}
	return capsFromValidMeta(meta)
}

func capsFromValidMeta(meta []byte) Caps {
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

// Need is an input request as the capability gate sees it: its method,
// and for elicitation and sampling the one fact that needs a finer
// capability. An adapter builds it from its SDK's typed request; NeedOf
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
	return needOf(method, params, validObject)
}

// needOf is NeedOf with obj reading params as an object (nil when not one).
func needOf(method string, params json.RawMessage, obj func(json.RawMessage) []byte) Need {
	n := Need{Method: method}
	switch method {
	case MethodElicit:
		p := obj(params) // a malformed body is judged as form mode
		mode := stringMember(p, "mode")
		n.URLMode = mode == "url" || (mode == "" && stringMember(p, "url") != "")
	case MethodSampling:
		tools, _ := member(obj(params), "tools")
		n.Tools = len(tools) > 2 && tools[0] == '[' && len(TrimSpace(tools[1:len(tools)-1])) > 0
	}
	return n
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
	return missing(c, reqs, validObject)
}

// MissingParsed is Missing for entries that are members of a parsed
// Object, so valid JSON without surrounding space (a message the caller
// validated once): it does not validate them again.
func MissingParsed(c Caps, reqs map[string]json.RawMessage) []string {
	return missing(c, reqs, parsedObject)
}

func missing(c Caps, reqs map[string]json.RawMessage, obj func(json.RawMessage) []byte) []string {
	return c.LacksAny(func(yield func(Need) bool) {
		for _, raw := range reqs {
			n := Need{Method: Unvettable}
			if r := obj(raw); r != nil {
				if method := stringMember(r, "method"); method != "" {
					params, _ := member(r, "params")
					n = needOf(method, params, obj)
				}
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

// validObject returns raw, trimmed, if it is one valid JSON object, and
// nil otherwise.
func validObject(raw json.RawMessage) []byte {
	raw = TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil
	}
	return raw
}

// parsedObject returns raw, valid JSON without surrounding space, if it
// is an object, and nil otherwise.
func parsedObject(raw json.RawMessage) []byte {
	if len(raw) == 0 || raw[0] != '{' {
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
