package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// modernMeta is a 2026-07-28 request _meta.
func modernMeta() map[string]any {
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": allCaps}
}

// standardHeader is the header a 2026-07-28 client sends with a message:
// MCP-Protocol-Version, Mcp-Method and, where the spec names one, Mcp-Name.
func standardHeader(method string, params map[string]any) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		h.Set("Mcp-Name", params["name"].(string))
	case "resources/read":
		h.Set("Mcp-Name", params["uri"].(string))
	}
	return h
}

// post sends one request (id 9) with header h and decodes the final
// message of the answer.
func post(t *testing.T, url, method string, params map[string]any, h http.Header) result {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := result{raw: raw, status: resp.StatusCode}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"id":9`) {
				msg = []byte(d)
			}
		}
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("not JSON-RPC (%v): %s", err, raw)
	}
	return r
}

// directCall is a 2026-07-28 request with its _meta and standard headers.
func directCall(t *testing.T, e *env, method string, params map[string]any) result {
	t.Helper()
	params["_meta"] = modernMeta()
	return post(t, e.px, method, params, standardHeader(method, params))
}

// directEnv is the proxy in front of Direct in front of srv.
func directEnv(t *testing.T, srv *mcp.Server) *env {
	t.Helper()
	var dials atomic.Int32
	d := bridge.NewDirect(dialer(t, srv, &dials), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	ring, _ := reqstate.GenerateKeyRing("k1", nil)
	h, err := proxy.New(proxy.Options{Upstream: "http://stdio.child/mcp", Transport: d,
		Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &env{px: hs.URL + "/mcp"}
}

// regionTool has one argument that travels in a header too
// (x-mcp-header, SEP-2243).
func regionTool(name string) (*mcp.Tool, mcp.ToolHandler) {
	return &mcp.Tool{Name: name, InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
				"size":   map[string]any{"type": "integer", "x-mcp-header": "Size"},
			},
		}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
		}
}

// TestDirectTransportRules: what an HTTP server refuses before its MCP
// layer sees a message, Direct refuses for its stdio child, with the
// status and code go-sdk's StreamableHTTPHandler gives.
func TestDirectTransportRules(t *testing.T) {
	var runs atomic.Int32
	srv := modernServer(&runs)
	srv.AddTool(regionTool("regional"))
	e := directEnv(t, srv)

	region := func(args map[string]any) map[string]any {
		return map[string]any{"name": "regional", "arguments": args, "_meta": modernMeta()}
	}
	with := func(method string, params map[string]any, edit func(h http.Header)) http.Header {
		h := standardHeader(method, params)
		edit(h)
		return h
	}
	cases := []struct {
		name   string
		method string
		params map[string]any
		edit   func(h http.Header)
		status int
		code   int // 0: a result
	}{
		{"no Mcp-Method", "tools/list", map[string]any{"_meta": modernMeta()}, func(h http.Header) { h.Del("Mcp-Method") }, 400, -32020},
		{"no Mcp-Name", "tools/call", region(map[string]any{}), func(h http.Header) { h.Del("Mcp-Name") }, 400, -32020},
		{"_meta without MCP-Protocol-Version", "tools/list", map[string]any{"_meta": modernMeta()}, func(h http.Header) { h.Del("Mcp-Protocol-Version") }, 400, -32020},
		{"modern header without _meta", "server/discover", map[string]any{}, func(http.Header) {}, 400, -32602},
		{"no protocolVersion in _meta", "server/discover", map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}, func(http.Header) {}, 400, -32602},
		{"a 2025-11-25 request", "tools/list", map[string]any{}, func(h http.Header) {
			h.Del("Mcp-Method")
			h.Set("Mcp-Protocol-Version", "2025-11-25")
		}, 400, -32022},
		// An initialize is a 2025-11-25 client's: it gets a session and a
		// child of its own (legacysessions.go), never the shared child.
		{"an initialize", "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "c", "version": "1"}}, func(h http.Header) {
			h.Del("Mcp-Method")
			h.Del("Mcp-Protocol-Version")
		}, 200, 0},
		{"child's -32602 is 400", "tools/list", map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}, func(http.Header) {}, 400, -32602},
		{"Mcp-Param missing", "tools/call", region(map[string]any{"region": "Hello"}), func(http.Header) {}, 400, -32020},
		{"Mcp-Param plain", "tools/call", region(map[string]any{"region": "Hello"}), func(h http.Header) { h.Set("Mcp-Param-Region", "Hello") }, 200, 0},
		{"Mcp-Param base64", "tools/call", region(map[string]any{"region": "Hello"}), func(h http.Header) { h.Set("Mcp-Param-Region", "=?base64?SGVsbG8=?=") }, 200, 0},
		{"Mcp-Param base64 without padding", "tools/call", region(map[string]any{"region": "Hello"}), func(h http.Header) { h.Set("Mcp-Param-Region", "=?base64?SGVsbG8?=") }, 400, -32020},
		{"Mcp-Param base64 bad characters", "tools/call", region(map[string]any{"region": "Hello"}), func(h http.Header) { h.Set("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=") }, 400, -32020},
		{"Mcp-Param other value", "tools/call", region(map[string]any{"region": "Hello"}), func(h http.Header) { h.Set("Mcp-Param-Region", "World") }, 400, -32020},
		{"Mcp-Param for an absent argument", "tools/call", region(map[string]any{}), func(h http.Header) { h.Set("Mcp-Param-Region", "Hello") }, 400, -32020},
		{"Mcp-Param integer", "tools/call", region(map[string]any{"size": 42}), func(h http.Header) { h.Set("Mcp-Param-Size", "42") }, 200, 0},
		{"Mcp-Param integer other value", "tools/call", region(map[string]any{"size": 42}), func(h http.Header) { h.Set("Mcp-Param-Size", "43") }, 400, -32020},
		{"a tool without annotations", "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{}, "_meta": modernMeta()}, func(http.Header) {}, 200, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, e.px, c.method, c.params, with(c.method, c.params, c.edit))
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.raw)
			}
			switch {
			case c.code == 0 && r.Error != nil:
				t.Fatalf("want a result, got %s", r.raw)
			case c.code != 0 && (r.Error == nil || r.Error.Code != c.code):
				t.Fatalf("want error %d, got %s", c.code, r.raw)
			case c.code != 0 && !strings.Contains(string(r.raw), `"id":9`):
				t.Fatalf("the error does not carry the request's id: %s", r.raw)
			}
		})
	}
}

// sseReader reads one event stream's data lines as JSON-RPC messages.
type sseReader struct {
	t      *testing.T
	cancel context.CancelFunc
	sc     *bufio.Scanner
}

type frame struct {
	Method string `json:"method"`
	Params struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		Notifications map[string]bool            `json:"notifications"`
	} `json:"params"`
}

// openListen posts a subscriptions/listen with request id id and the
// filter notifications; the stream stays open until close.
func openListen(t *testing.T, url string, id any, notifications map[string]any) *sseReader {
	t.Helper()
	params := map[string]any{"_meta": modernMeta(), "notifications": notifications}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header = standardHeader("subscriptions/listen", params)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("subscriptions/listen: %d %s, want an event stream: %s", resp.StatusCode, ct, b)
	}
	s := &sseReader{t: t, cancel: func() { cancel(); resp.Body.Close() }, sc: bufio.NewScanner(resp.Body)}
	t.Cleanup(s.cancel)
	return s
}

// next is the stream's next message.
func (s *sseReader) next() frame {
	s.t.Helper()
	for s.sc.Scan() {
		if d, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			var f frame
			if err := json.Unmarshal([]byte(d), &f); err != nil {
				s.t.Fatalf("event is not JSON: %s", d)
			}
			return f
		}
	}
	s.t.Fatalf("the stream ended: %v", s.sc.Err())
	return frame{}
}

// TestDirectListen: clients' subscriptions through one shared child each
// get their own acknowledgement and only the notifications they asked
// for, tagged with their own request id; one client closing its stream
// leaves the others' subscriptions alive (go-sdk keeps one listen per
// session, and the child is one session for every client).
func TestDirectListen(t *testing.T) {
	var runs atomic.Int32
	srv := modernServer(&runs)
	srv.AddPrompt(&mcp.Prompt{Name: "p0"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	e := directEnv(t, srv)

	tools := map[string]any{"toolsListChanged": true}
	a := openListen(t, e.px, "a", tools)
	b := openListen(t, e.px, 9, map[string]any{"promptsListChanged": true})
	c := openListen(t, e.px, 9, tools)
	for _, x := range []struct {
		s    *sseReader
		id   string
		kind string
	}{{a, `"a"`, "toolsListChanged"}, {b, `9`, "promptsListChanged"}, {c, `9`, "toolsListChanged"}} {
		ack := x.s.next()
		if ack.Method != "notifications/subscriptions/acknowledged" || string(ack.Params.Meta["io.modelcontextprotocol/subscriptionId"]) != x.id ||
			len(ack.Params.Notifications) != 1 || !ack.Params.Notifications[x.kind] {
			t.Fatalf("first frame %+v, want the acknowledgement of %s for subscription %s", ack, x.kind, x.id)
		}
	}

	// Direct learns the tool list (for x-mcp-header) on a first call.
	p := map[string]any{"name": "confirm", "arguments": map[string]any{}, "_meta": modernMeta()}
	if r := post(t, e.px, "tools/call", p, standardHeader("tools/call", p)); r.Error != nil {
		t.Fatalf("confirm: %s", r.raw)
	}

	a.cancel() // a client goes away: the others keep their subscriptions
	srv.AddTool(regionTool("added"))
	if f := c.next(); f.Method != "notifications/tools/list_changed" || string(f.Params.Meta["io.modelcontextprotocol/subscriptionId"]) != "9" {
		t.Fatalf("c: %+v, want tools/list_changed tagged 9", f)
	}
	srv.AddPrompt(&mcp.Prompt{Name: "p1"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	// b asked for prompts only: the tools change never reaches it.
	if f := b.next(); f.Method != "notifications/prompts/list_changed" || string(f.Params.Meta["io.modelcontextprotocol/subscriptionId"]) != "9" {
		t.Fatalf("b: %+v, want prompts/list_changed tagged 9", f)
	}

	// The tools change emptied Direct's list: the added tool's header
	// rule holds at once.
	p = map[string]any{"name": "added", "arguments": map[string]any{"region": "x"}, "_meta": modernMeta()}
	if r := post(t, e.px, "tools/call", p, standardHeader("tools/call", p)); r.status != 400 || r.Error == nil || r.Error.Code != -32020 {
		t.Fatalf("a new tool's missing Mcp-Param header: %s", r.raw)
	}
}
