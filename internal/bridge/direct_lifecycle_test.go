package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/reqstate"
)

// progressServer is a 2026-07-28 server with a tool that reports
// progress on the request's token before it answers, and one that waits
// until its call is cancelled (entered when it starts, then the error it
// ended with on cancelled).
func progressServer(entered chan<- struct{}, cancelled chan<- error) *mcp.Server {
	var runs atomic.Int32
	s := modernServer(&runs)
	mcp.AddTool(s, &mcp.Tool{Name: "progress", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			entered <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, nil, ctx.Err()
		})
	return s
}

// modernCall is a 2026-07-28 tools/call of name, with its standard
// headers, for a Direct.
func modernCall(name string, meta map[string]any) ([]byte, http.Header) {
	m := modernMeta()
	for k, v := range meta {
		m[k] = v
	}
	p := map[string]any{"name": name, "arguments": map[string]any{}, "_meta": m}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
	return body, standardHeader("tools/call", p)
}

// TestDirectProgressMappedBack: the shared child sees a progress token of
// the connection's own, never the client's, and its progress
// notifications reach the client with the client's token.
func TestDirectProgressMappedBack(t *testing.T) {
	var dials atomic.Int32
	ts := &taps{}
	d := bridge.NewDirect(ts.wrap(dialer(t, progressServer(nil, nil), &dials)), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	for _, tok := range []any{"client-7", 7} {
		body, h := modernCall("progress", map[string]any{"progressToken": tok})
		resp, raw := sendRaw(t, context.Background(), d, reqstate.Principal{}, h, body)
		if r := decodeResult(t, resp, raw); r.text() != "done" {
			t.Fatalf("progress: %s", raw)
		}
		var progress []json.RawMessage
		for _, l := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(data, "notifications/progress") {
				var n struct {
					Params struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					} `json:"params"`
				}
				if err := json.Unmarshal([]byte(data), &n); err != nil {
					t.Fatalf("event %s: %v", data, err)
				}
				progress = append(progress, n.Params.ProgressToken)
			}
		}
		want, _ := json.Marshal(tok)
		if len(progress) != 1 || !bytes.Equal(progress[0], want) {
			t.Fatalf("progress notifications with tokens %s, want one with the client's %s: %s", progress, want, raw)
		}
	}
	for _, m := range ts.messages("tools/call") {
		if bytes.Contains(m.Params, []byte("client-7")) || bytes.Contains(m.Params, []byte(`"progressToken":7`)) {
			t.Fatalf("the shared child saw a client's progress token: %s", m.Params)
		}
	}
}

// TestDirectCancelsWhenClientGoes: a client that goes away has its call
// cancelled on the shared child (notifications/cancelled), which would
// otherwise run it to the end for nobody.
func TestDirectCancelsWhenClientGoes(t *testing.T) {
	entered, cancelled := make(chan struct{}, 1), make(chan error, 1)
	var dials atomic.Int32
	d := bridge.NewDirect(dialer(t, progressServer(entered, cancelled), &dials), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	body, h := modernCall("hang", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://stdio.child/mcp", bytes.NewReader(body))
		req.Header = h
		if resp, err := d.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the call did not reach the child")
	}
	cancel()
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("the child's call ended without an error")
		}
	case <-time.After(waitFor):
		t.Fatal("the child's call was not cancelled after its client went away")
	}
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("the round trip of a client that went away did not return")
	}
}

// TestDirectSafeIntegerHeader: an Mcp-Param header carries an integer
// argument only within the range a double holds exactly (±(2^53-1)):
// beyond it, where two integers share one double, it matches no header.
func TestDirectSafeIntegerHeader(t *testing.T) {
	var runs atomic.Int32
	srv := modernServer(&runs)
	srv.AddTool(regionTool("regional"))
	var dials atomic.Int32
	d := bridge.NewDirect(dialer(t, srv, &dials), nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	for _, c := range []struct {
		size   string
		header string
		ok     bool
	}{
		{"9007199254740991", "9007199254740991", true},    // 2^53-1
		{"-9007199254740991", "-9007199254740991", true},  // -(2^53-1)
		{"9007199254740992", "9007199254740992", false},   // 2^53
		{"9007199254740994", "9007199254740994", false},   // 2^53+2
		{"-9007199254740994", "-9007199254740994", false}, // -(2^53+2)
		{"9007199254740994", "9007199254740993", false},   // 2^53+2 against a header that parses to 2^53
	} {
		p := map[string]any{"name": "regional", "arguments": json.RawMessage(`{"size":` + c.size + `}`), "_meta": modernMeta()}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
		h := standardHeader("tools/call", p)
		h.Set("Mcp-Param-Size", c.header)
		resp, raw := sendRaw(t, context.Background(), d, reqstate.Principal{}, h, body)
		r := decodeResult(t, resp, raw)
		switch {
		case c.ok && (r.Error != nil || r.text() != "ran"):
			t.Errorf("size %s with Mcp-Param-Size %s: %d %s, want the call to run", c.size, c.header, r.status, raw)
		case !c.ok && (r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32020):
			t.Errorf("size %s with Mcp-Param-Size %s: %d %s, want 400 and -32020", c.size, c.header, r.status, raw)
		}
	}
}
