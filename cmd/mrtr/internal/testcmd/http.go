package testcmd

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
)

// RPCPost sends one 2026-07-28 request, with its _meta and standard
// headers, and returns its result or error.
func RPCPost(t testing.TB, url, method string, params map[string]any) (result map[string]json.RawMessage, rpcErr map[string]json.RawMessage) {
	t.Helper()
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}
	if extra, ok := params["_meta"].(map[string]any); ok { // a caller's own _meta members (cmd/mrtr's audit_test.go)
		maps.Copy(meta, extra)
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	// The headers a 2026-07-28 client sends; a server over HTTP (and the
	// proxy in front of a stdio child) refuses a request without them.
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if id, ok := params["taskId"].(string); ok { // tasks/*: the extension's routing header
		req.Header.Set("Mcp-Name", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"id":1`) {
				raw = []byte(d)
			}
		}
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not JSON-RPC: %s", method, raw)
	}
	return m.Result, m.Error
}

// GetHealth GETs url and returns its status and trimmed body.
func GetHealth(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// FreeAddr is a 127.0.0.1 address at which nothing listens (a port just
// given back by the kernel).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
