package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

func testRing(t *testing.T) *reqstate.KeyRing {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// startProxy serves a proxy to upstream over loopback.
func startProxy(t *testing.T, upstream string, ring *reqstate.KeyRing, gopts *mrtr.Options, popts *proxy.Options) *httptest.Server {
	t.Helper()
	if ring == nil {
		ring = testRing(t)
	}
	var o proxy.Options
	if popts != nil {
		o = *popts
	}
	o.Upstream = upstream
	o.Guard = mrtr.New(reqstate.New(ring, nil), gopts)
	h, err := proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type reply struct {
	status int
	ctype  string
	id     json.RawMessage
	result map[string]json.RawMessage
	err    *rpcError
	raw    []byte
}

func (r reply) state() string {
	var s string
	json.Unmarshal(r.result["requestState"], &s)
	return s
}

func (r reply) resultType() string {
	var s string
	json.Unmarshal(r.result["resultType"], &s)
	return s
}

func (r reply) reason() string {
	if r.err == nil {
		return ""
	}
	var d struct{ Reason string }
	json.Unmarshal(r.err.Data, &d)
	return d.Reason
}

func (r reply) text() string {
	var c []struct{ Text string }
	json.Unmarshal(r.result["content"], &c)
	if len(c) == 0 {
		return ""
	}
	return c[0].Text
}

// callReq describes one tools/call.
type callReq struct {
	id        any
	name      string
	args      any
	state     *string
	responses any
	caps      any // clientCapabilities; nil means elicitation + sampling
	version   string
	header    http.Header
}

func (c callReq) body() []byte {
	caps := c.caps
	if caps == nil {
		caps = map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}}
	}
	version := c.version
	if version == "" {
		version = "2026-07-28"
	}
	params := map[string]any{"name": c.name, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version,
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
	if c.args != nil {
		params["arguments"] = c.args
	}
	if c.state != nil {
		params["requestState"] = *c.state
	}
	if c.responses != nil {
		params["inputResponses"] = c.responses
	}
	id := c.id
	if id == nil {
		id = 1
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return b
}

func ptr(s string) *string { return &s }

// post sends c and decodes the final message (JSON or the last response
// of an event stream).
func post(t *testing.T, url string, c callReq) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(c.body()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	version := c.version
	if version == "" {
		version = "2026-07-28"
	}
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", c.name)
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: b}
	msg := b
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		msg = nil
		for _, ev := range events(b) {
			if bytes.Contains(ev, []byte(`"result"`)) || bytes.Contains(ev, []byte(`"error"`)) {
				msg = ev
			}
		}
	}
	decode(t, msg, &r)
	return r
}

func decode(t *testing.T, msg []byte, r *reply) {
	t.Helper()
	var m struct {
		ID     json.RawMessage            `json:"id"`
		Result map[string]json.RawMessage `json:"result"`
		Error  *rpcError                  `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("reply is not JSON-RPC (%v): %q", err, r.raw)
	}
	r.id, r.result, r.err = m.ID, m.Result, m.Error
}

// events returns the data of each event of an event stream.
func events(b []byte) [][]byte {
	var out [][]byte
	var data []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				out = append(out, data)
			}
			data = nil
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if data != nil {
		out = append(out, data)
	}
	return out
}

// pause makes a first call to name and returns its sealed state.
func pause(t *testing.T, url, name string, args any) string {
	t.Helper()
	r := post(t, url, callReq{name: name, args: args})
	if r.err != nil || r.resultType() != "input_required" || r.state() == "" {
		t.Fatalf("first call to %s: want input_required with a requestState, got %s", name, r.raw)
	}
	return r.state()
}

func confirmed() map[string]any {
	return map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
}

func wantReject(t *testing.T, r reply, reason string) {
	t.Helper()
	if r.err == nil || r.err.Code != -32602 || r.err.Message != mrtr.RejectMessage || r.reason() != reason {
		t.Fatalf("want -32602 %q reason %q, got %s", mrtr.RejectMessage, reason, r.raw)
	}
}
