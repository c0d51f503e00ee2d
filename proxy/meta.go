package proxy

import "encoding/json"

// traceMeta returns the W3C trace context of a request's _meta
// (traceparent, tracestate), for the guard's Observer, or nil. Only the
// two strings are kept: the rest of _meta is the upstream's business.
func traceMeta(meta json.RawMessage) map[string]any {
	if len(meta) == 0 {
		return nil
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if json.Unmarshal(meta, &tc) != nil || tc.Traceparent == "" {
		return nil
	}
	m := map[string]any{"traceparent": tc.Traceparent}
	if tc.Tracestate != "" {
		m["tracestate"] = tc.Tracestate
	}
	return m
}
