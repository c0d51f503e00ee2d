package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Helpers of the tests that pin what the mutation audit of issue 27
// found untested: requests sent straight to a Bridge or a Direct, past
// the proxy and its guard, and upstreams whose every message is seen.

// waitFor bounds every wait of these tests: long enough for a loaded
// machine, short enough that a missing event fails the test with a
// message rather than by the test binary's timeout.
const waitFor = 20 * time.Second

// sendRaw sends body straight to tr (a Bridge or a Direct) as caller p
// (anonymous when zero), with header h added to the usual ones, and
// returns the response with its body read.
func sendRaw(t *testing.T, ctx context.Context, tr http.RoundTripper, p reqstate.Principal, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	if !p.Anonymous() {
		ctx = bridge.WithCaller(ctx, p)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// straight sends one 2026-07-28 request (id 9) with the client
// capabilities caps (allCaps when nil) straight to tr as caller p, and
// decodes its final message.
func straight(t *testing.T, tr http.RoundTripper, p reqstate.Principal, method string, params map[string]any, caps map[string]any) result {
	t.Helper()
	if caps == nil {
		caps = allCaps
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	resp, raw := sendRaw(t, context.Background(), tr, p, nil, body)
	return decodeResult(t, resp, raw)
}

// decodeResult decodes the message with id 9 of a response: its JSON
// body, or the event of its stream that carries that id.
func decodeResult(t *testing.T, resp *http.Response, raw []byte) result {
	t.Helper()
	return decodeResultID(t, resp, raw, "9")
}

// decodeResultID is decodeResult for the message with id id.
func decodeResultID(t *testing.T, resp *http.Response, raw []byte, id string) result {
	t.Helper()
	r := result{raw: raw, status: resp.StatusCode}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"id":`+id) {
				msg = []byte(d)
			}
		}
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("not JSON-RPC (%v): %d %s", err, resp.StatusCode, raw)
	}
	return r
}

func user(sub string) reqstate.Principal { return reqstate.Principal{Issuer: "test", Subject: sub} }

// sessionServer is a 2025-11-25 server whose tools tell sessions apart:
// count answers how often it ran in this server session (so "1" on a
// session nobody used), ask elicits once and reports how the elicitation
// ended on asked, and survey elicits twice, one round each.
func sessionServer(asked chan<- error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sessions", Version: "1"}, nil)
	var mu sync.Mutex
	counts := map[*mcp.ServerSession]int{}
	mcp.AddTool(s, &mcp.Tool{Name: "count", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			counts[req.Session]++
			n := counts[req.Session]
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Sure?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"v": {Type: "string"}},
			}})
			if asked != nil {
				asked <- err
			}
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("got %v", res.Content["v"])}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "survey", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			var got []string
			for _, q := range []string{"name", "colour"} {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your " + q + "?", RequestedSchema: &jsonschema.Schema{
					Type: "object", Properties: map[string]*jsonschema.Schema{"v": {Type: "string"}},
				}})
				if err != nil {
					return nil, nil, err
				}
				got = append(got, fmt.Sprint(res.Content["v"]))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(got, ",")}}}, nil, nil
		})
	return s
}

func answer(v string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"v": v}}
}

// tap is an Upstream whose every message from the proxy is kept.
type tap struct {
	bridge.Upstream
	mu   sync.Mutex
	sent [][]byte
}

func (u *tap) Send(b []byte) error {
	u.mu.Lock()
	u.sent = append(u.sent, bytes.Clone(b))
	u.mu.Unlock()
	return u.Upstream.Send(b)
}

// messages returns the messages of method (responses for "") the
// upstream was sent.
func (u *tap) messages(method string) []*rpc.Message {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*rpc.Message
	for _, b := range u.sent {
		if m, err := rpc.Parse(b); err == nil && m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// taps wraps a dial so that every upstream it opens is a tap.
type taps struct {
	mu  sync.Mutex
	all []*tap
}

func (ts *taps) wrap(d func(context.Context) (bridge.Upstream, error)) func(context.Context) (bridge.Upstream, error) {
	return func(ctx context.Context) (bridge.Upstream, error) {
		up, err := d(ctx)
		if err != nil {
			return nil, err
		}
		u := &tap{Upstream: up}
		ts.mu.Lock()
		ts.all = append(ts.all, u)
		ts.mu.Unlock()
		return u, nil
	}
}

// messages returns the messages of method (responses for "") any
// upstream was sent.
func (ts *taps) messages(method string) []*rpc.Message {
	ts.mu.Lock()
	all := append([]*tap(nil), ts.all...)
	ts.mu.Unlock()
	var out []*rpc.Message
	for _, u := range all {
		out = append(out, u.messages(method)...)
	}
	return out
}

// scriptKids starts, for every dial, a hand-written stdio server:
// answer returns the response to each request the proxy sends it (nil
// for none; a []any is several messages, sent in order), as a child
// speaking JSON-RPC lines would; responded, when set, gets every
// response the proxy sends it and returns what to send then, as answer
// does. The children are kept so a test can see
// which were stopped.
type scriptKids struct {
	answer    func(m *rpc.Message) any
	responded func(m *rpc.Message) any
	mu        sync.Mutex
	started   []*child
}

func (cs *scriptKids) dial(context.Context) (bridge.Upstream, error) {
	cr, sw := io.Pipe() // server -> proxy
	sr, cw := io.Pipe() // proxy -> server
	go func() {
		srv := rpc.NewLines(sr, sw, 0)
		for b := range srv.Recv() {
			m, err := rpc.Parse(b)
			var res any
			switch {
			case err != nil:
				continue
			case m.Method == "" && cs.responded != nil:
				res = cs.responded(m)
			case !m.IsRequest():
				continue
			default:
				res = cs.answer(m)
			}
			msgs, ok := res.([]any)
			if !ok {
				msgs = []any{res}
			}
			for _, r := range msgs {
				if r == nil {
					continue
				}
				out, _ := json.Marshal(r)
				if srv.Send(out) != nil {
					return
				}
			}
		}
	}()
	c := &child{Lines: rpc.NewLines(cr, cw, 0), closed: make(chan struct{}), kill: func() {
		cw.Close()
		sw.Close()
		cr.Close()
		sr.Close()
	}}
	cs.mu.Lock()
	cs.started = append(cs.started, c)
	cs.mu.Unlock()
	return c, nil
}

func (cs *scriptKids) list() []*child {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]*child(nil), cs.started...)
}

// stoppedNow fails the test unless c's Close was called already.
func stoppedNow(t *testing.T, c *child, what string) {
	t.Helper()
	select {
	case <-c.closed:
	default:
		t.Fatalf("%s: its child was not stopped", what)
	}
}

// stopped fails the test unless c's Close was called within waitFor.
func stopped(t *testing.T, c *child, what string) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(waitFor):
		t.Fatalf("%s: its child was not stopped", what)
	}
}
