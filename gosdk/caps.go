package gosdk

import (
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// CodeMissingCapability is the JSON-RPC code of an input request the
// client did not declare a capability for (MCP 2026-07-28).
const CodeMissingCapability = mcpwire.CodeMissingCapability

// capsOf reads what a client declared from go-sdk's decoded
// capabilities; nil declares nothing.
func capsOf(c *mcp.ClientCapabilities) mcpwire.Caps {
	var s mcpwire.Caps
	if c == nil {
		return s
	}
	if e := c.Elicitation; e != nil {
		// An empty elicitation object declares form mode.
		s.ElicitForm = e.Form != nil || e.URL == nil
		s.ElicitURL = e.URL != nil
	}
	if c.Sampling != nil { //nolint:staticcheck // sampling is deprecated but still in the protocol
		s.Sampling = true
		s.SamplingTools = c.Sampling.Tools != nil //nolint:staticcheck
	}
	s.Roots = c.RootsV2 != nil || c.Roots.ListChanged //nolint:staticcheck
	return s
}

// declaredCapabilities returns what req's client declared on this very
// request (its _meta, read without go-sdk's decoding round trip, which
// allocates a 32 KiB buffer per call), or, for a legacy session, at
// initialize. full is go-sdk's own accessor, used only when the value is
// not plain JSON.
func declaredCapabilities(req mcp.Request, full func() *mcp.ClientCapabilities) mcpwire.Caps {
	if p := req.GetParams(); p != nil {
		if raw, ok := p.GetMeta()[mcp.MetaKeyClientCapabilities]; ok {
			if m, ok := raw.(map[string]any); ok {
				return mcpwire.CapsFromValue(m)
			}
		}
	}
	return capsOf(full())
}

// needOf is what the capability gate needs to know of input request r.
func needOf(r mcp.InputRequest) mcpwire.Need {
	switch p := r.(type) {
	case *mcp.ElicitParams:
		return mcpwire.Need{Method: mcpwire.MethodElicit, URLMode: p.Mode == "url" || (p.Mode == "" && p.URL != "")}
	case *mcp.CreateMessageParams:
		return mcpwire.Need{Method: mcpwire.MethodSampling}
	case *mcp.CreateMessageWithToolsParams:
		return mcpwire.Need{Method: mcpwire.MethodSampling, Tools: len(p.Tools) > 0}
	case *mcp.ListRootsParams:
		return mcpwire.Need{Method: mcpwire.MethodListRoots}
	}
	return mcpwire.Need{Method: mcpwire.Unvettable}
}

// needsOf is needOf for every request of reqs; nil for none.
func needsOf(reqs mcp.InputRequestMap) adapt.Needs { return adapt.NeedsOf(reqs, needOf) }

// MissingCapabilityError returns the -32021 JSON-RPC error whose
// data.requiredCapabilities is a ClientCapabilities object holding the
// named capabilities: "elicitation", "elicitation.form",
// "elicitation.url", "sampling", "sampling.tools" or "roots".
func MissingCapabilityError(capabilities ...string) error {
	w := adapt.MissingCapabilities(capabilities...)
	return &jsonrpc.Error{Code: int64(w.Code), Message: w.Message, Data: w.Data}
}
