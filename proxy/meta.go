package proxy

import (
	"encoding/json"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// traceMeta returns what the guard's Observer and Auditor read of a
// request's _meta, or nil: the W3C trace context (traceparent,
// tracestate) and the client's self-reported clientInfo (as raw JSON).
// Only these are kept: the rest of _meta is the upstream's business.
func traceMeta(meta json.RawMessage) map[string]any {
	if len(meta) == 0 {
		return nil
	}
	var tc struct {
		Traceparent string          `json:"traceparent"`
		Tracestate  string          `json:"tracestate"`
		ClientInfo  json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	}
	if json.Unmarshal(meta, &tc) != nil || (tc.Traceparent == "" && tc.ClientInfo == nil) {
		return nil
	}
	m := make(map[string]any, 3)
	if tc.Traceparent != "" {
		m["traceparent"] = tc.Traceparent
	}
	if tc.Tracestate != "" {
		m["tracestate"] = tc.Tracestate
	}
	if tc.ClientInfo != nil {
		m[mcpwire.MetaClientInfo] = tc.ClientInfo
	}
	return m
}
