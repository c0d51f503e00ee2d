package adaptertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Client speaks raw JSON-RPC over Streamable HTTP, as a client in any
// language does: no SDK between the suite and the wire.
type Client struct {
	URL   string         // the endpoint, e.g. base + "/mcp"
	Token string         // bearer token ("issuer|subject"); empty for none
	Caps  map[string]any // clientCapabilities of 2026-07-28 requests; nil means {"elicitation":{}}

	session string // a 2025-11-25 session (Mcp-Session-Id), after Initialize
	version string // the session's protocol version
	ids     atomic.Int64
}

// Response is one JSON-RPC response and the HTTP status it came with.
type Response struct {
	Status int
	Result map[string]any
	Error  *Error
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Reason is data.reason of a rejected requestState.
func (e *Error) Reason() string {
	var d struct{ Reason string }
	json.Unmarshal(e.Data, &d)
	return d.Reason
}

// State is the requestState of an input_required result, or "".
func (r Response) State() string {
	s, _ := r.Result["requestState"].(string)
	return s
}

// Text joins the text contents of a tool result.
func (r Response) Text() string {
	var b strings.Builder
	content, _ := r.Result["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			if s, ok := m["text"].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func (r Response) String() string {
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d error %d %q %s", r.Status, r.Error.Code, r.Error.Message, r.Error.Data)
	}
	b, _ := json.Marshal(r.Result)
	return fmt.Sprintf("HTTP %d result %s", r.Status, b)
}

// nameOf is what the Mcp-Name header carries for a request: the tool or
// prompt name, the resource URI, or the task id of a tasks/* request.
func nameOf(method string, params map[string]any) string {
	for _, k := range []string{"name", "uri", "taskId"} {
		if s, ok := params[k].(string); ok {
			return s
		}
	}
	return ""
}

// Call sends one request and returns its response; transport failures
// fail the test. params is not modified.
func (c *Client) Call(t testing.TB, method string, params map[string]any) Response {
	t.Helper()
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	h := http.Header{}
	if c.session == "" {
		caps := c.Caps
		if caps == nil {
			caps = map[string]any{"elicitation": map[string]any{}}
		}
		p["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "adaptertest", "version": "1"},
		}
		h.Set("Mcp-Protocol-Version", "2026-07-28")
		h.Set("Mcp-Method", method)
		if name := nameOf(method, params); name != "" {
			h.Set("Mcp-Name", name)
		}
	} else {
		h.Set("Mcp-Session-Id", c.session)
		h.Set("Mcp-Protocol-Version", c.version)
	}
	id := c.ids.Add(1)
	resp, _ := c.post(t, h, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p}, id)
	return resp
}

// Initialize opens a session at an older protocol version (2025-11-25)
// with the given capabilities; later calls go through it.
func (c *Client) Initialize(t testing.TB, version string, caps map[string]any) {
	t.Helper()
	id := c.ids.Add(1)
	resp, hdr := c.post(t, http.Header{}, map[string]any{"jsonrpc": "2.0", "id": id, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": caps, "clientInfo": map[string]any{"name": "adaptertest", "version": "1"},
	}}, id)
	if resp.Error != nil {
		t.Fatalf("initialize: %v", resp)
	}
	c.session, c.version = hdr.Get("Mcp-Session-Id"), version
	if c.session == "" {
		t.Fatalf("initialize: no Mcp-Session-Id: %v", resp)
	}
	h := http.Header{}
	h.Set("Mcp-Session-Id", c.session)
	h.Set("Mcp-Protocol-Version", version)
	c.post(t, h, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}, 0)
}

// post sends msg and reads the response with id (from JSON or an event
// stream); id 0 reads nothing.
func (c *Client) post(t testing.TB, h http.Header, msg map[string]any, id int64) (Response, http.Header) {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := Response{Status: resp.StatusCode}
	if id == 0 {
		io.Copy(io.Discard, resp.Body)
		return out, resp.Header
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				msgs = append(msgs, []byte(d))
			}
		}
	} else {
		raw, _ := io.ReadAll(resp.Body)
		msgs = append(msgs, raw)
	}
	for _, raw := range msgs {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result map[string]any  `json:"result"`
			Error  *Error          `json:"error"`
		}
		if json.Unmarshal(raw, &m) != nil || string(m.ID) != fmt.Sprint(id) {
			continue
		}
		out.Result, out.Error = m.Result, m.Error
		return out, resp.Header
	}
	t.Fatalf("POST %s: HTTP %d, no response to request %d in %q", c.URL, resp.StatusCode, id, msgs)
	return out, nil
}

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }
