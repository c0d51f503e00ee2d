package audit

import (
	"encoding/json"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// clientOf reads the clientInfo of a request's _meta, as an adapter
// decoded it (a map) or passed it (raw JSON); nil when absent.
func clientOf(meta map[string]any) *Client {
	v, ok := meta[mcpwire.MetaClientInfo]
	if !ok {
		return nil
	}
	var name, version string
	switch ci := v.(type) {
	case map[string]any:
		name, _ = ci["name"].(string)
		version, _ = ci["version"].(string)
	case map[string]string:
		name, version = ci["name"], ci["version"]
	case json.RawMessage:
		var c Client
		if json.Unmarshal(ci, &c) != nil {
			return nil
		}
		name, version = c.Name, c.Version
	default:
		return nil
	}
	if name == "" && version == "" {
		return nil
	}
	return &Client{Name: mcpwire.Shown(name), Version: mcpwire.Shown(version)}
}

// traceIDOf returns the trace id of the W3C traceparent in meta
// (version 00: "00-" + 32 hex + "-" + 16 hex + "-" + 2 hex), or "" when
// there is none or it is not one.
func traceIDOf(meta map[string]any) string {
	tp, _ := meta["traceparent"].(string)
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
		zero = zero && c == '0'
	}
	if zero {
		return ""
	}
	return id
}
