package gosdk

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CodeMissingCapability is the JSON-RPC code of an input request the
// client did not declare a capability for (MCP 2026-07-28).
const CodeMissingCapability = mcp.CodeMissingRequiredClientCapabilities

// capSet is what a client declared it can answer: the part of its
// capabilities the gate needs.
type capSet struct {
	elicitForm, elicitURL, sampling, samplingTools, roots bool
}

// capSetOf reads a capSet from go-sdk's decoded capabilities; nil
// declares nothing.
func capSetOf(c *mcp.ClientCapabilities) capSet {
	var s capSet
	if c == nil {
		return s
	}
	if e := c.Elicitation; e != nil {
		// An empty elicitation object declares form mode.
		s.elicitForm = e.Form != nil || e.URL == nil
		s.elicitURL = e.URL != nil
	}
	if c.Sampling != nil { //nolint:staticcheck // sampling is deprecated but still in the protocol
		s.sampling = true
		s.samplingTools = c.Sampling.Tools != nil //nolint:staticcheck
	}
	s.roots = c.RootsV2 != nil || c.Roots.ListChanged //nolint:staticcheck
	return s
}

// capSetFromJSON reads a capSet from the JSON object a request's _meta
// carries, without go-sdk's decoding round trip (which allocates a 32 KiB
// buffer per call).
func capSetFromJSON(m map[string]any) capSet {
	var s capSet
	if e, ok := m["elicitation"].(map[string]any); ok {
		_, form := e["form"]
		_, url := e["url"]
		s.elicitForm = form || !url
		s.elicitURL = url
	}
	if sm, ok := m["sampling"].(map[string]any); ok {
		s.sampling = true
		_, s.samplingTools = sm["tools"]
	}
	_, s.roots = m["roots"].(map[string]any)
	return s
}

// declaredCapabilities returns what req's client declared on this very
// request (its _meta), or, for a legacy session, at initialize. full is
// go-sdk's own accessor, used only when the value is not plain JSON.
func declaredCapabilities(req mcp.Request, full func() *mcp.ClientCapabilities) capSet {
	if p := req.GetParams(); p != nil {
		if raw, ok := p.GetMeta()[mcp.MetaKeyClientCapabilities]; ok {
			if m, ok := raw.(map[string]any); ok {
				return capSetFromJSON(m)
			}
		}
	}
	return capSetOf(full())
}

// requiredCapability names the capability r needs that caps lacks, as a
// path like "elicitation.url", or "" when caps has it.
func requiredCapability(caps capSet, r mcp.InputRequest) string {
	switch p := r.(type) {
	case *mcp.ElicitParams:
		if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
			if !caps.elicitURL {
				return "elicitation.url"
			}
			return ""
		}
		if !caps.elicitForm {
			return "elicitation.form"
		}
	case *mcp.CreateMessageParams:
		if !caps.sampling {
			return "sampling"
		}
	case *mcp.CreateMessageWithToolsParams:
		if !caps.sampling {
			return "sampling"
		}
		if len(p.Tools) > 0 && !caps.samplingTools {
			return "sampling.tools"
		}
	case *mcp.ListRootsParams:
		if !caps.roots {
			return "roots"
		}
	}
	return ""
}

// missingCapabilities returns the -32021 error for the requests of reqs
// the client cannot answer, or nil when it can answer them all.
func missingCapabilities(caps capSet, reqs mcp.InputRequestMap) error {
	var need map[string]bool // allocated only when something is missing
	for _, r := range reqs {
		if c := requiredCapability(caps, r); c != "" {
			if need == nil {
				need = map[string]bool{}
			}
			need[c] = true
		}
	}
	if len(need) == 0 {
		return nil
	}
	return MissingCapabilityError(slices.Sorted(maps.Keys(need))...)
}

// MissingCapabilityError returns the -32021 JSON-RPC error whose
// data.requiredCapabilities is a ClientCapabilities object holding the
// named capabilities: "elicitation", "elicitation.form",
// "elicitation.url", "sampling", "sampling.tools" or "roots".
func MissingCapabilityError(capabilities ...string) error {
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
	return &jsonrpc.Error{Code: CodeMissingCapability, Message: "missing required client capability", Data: data}
}
