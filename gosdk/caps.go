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

// requiredCapability names the capability r needs that caps lacks, as a
// path like "elicitation.url", or "" when caps has it. Capabilities are
// those declared on this request; nil caps declares nothing.
func requiredCapability(caps *mcp.ClientCapabilities, r mcp.InputRequest) string {
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	switch p := r.(type) {
	case *mcp.ElicitParams:
		e := caps.Elicitation
		if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
			if e == nil || e.URL == nil {
				return "elicitation.url"
			}
			return ""
		}
		// An empty elicitation object declares form mode.
		if e == nil || (e.Form == nil && e.URL != nil) {
			return "elicitation.form"
		}
	case *mcp.CreateMessageParams:
		if caps.Sampling == nil { //nolint:staticcheck // sampling is deprecated but still in the protocol
			return "sampling"
		}
	case *mcp.CreateMessageWithToolsParams:
		if caps.Sampling == nil { //nolint:staticcheck
			return "sampling"
		}
		if len(p.Tools) > 0 && caps.Sampling.Tools == nil { //nolint:staticcheck
			return "sampling.tools"
		}
	case *mcp.ListRootsParams:
		if caps.RootsV2 == nil && !caps.Roots.ListChanged { //nolint:staticcheck
			return "roots"
		}
	}
	return ""
}

// missingCapabilities returns the -32021 error for the requests of reqs
// the client cannot answer, or nil when it can answer them all.
func missingCapabilities(caps *mcp.ClientCapabilities, reqs mcp.InputRequestMap) error {
	need := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(reqs)) {
		if c := requiredCapability(caps, reqs[k]); c != "" {
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
