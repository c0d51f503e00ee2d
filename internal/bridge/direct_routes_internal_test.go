package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/rpc"
)

// pipeChild is a go-sdk server session over in-process pipes, framed as
// on stdio.
type pipeChild struct {
	*rpc.Lines
	close func()
}

func (p *pipeChild) Close(context.Context) error { p.close(); return nil }

// TestDirectProgressRoutesForgotten: a request's progress route lives
// while the request does; once it is answered (or its client went away)
// the connection keeps nothing of it, however many requests it served.
func TestDirectProgressRoutesForgotten(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, err
		})
	d := NewDirect(func(context.Context) (Upstream, error) {
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		sctx, cancel := context.WithCancel(context.Background())
		ss, err := srv.Connect(sctx, &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		return &pipeChild{Lines: rpc.NewLines(cr, cw, 0), close: func() {
			cw.Close()
			sw.Close()
			cr.Close()
			sr.Close()
			cancel()
			ss.Close()
		}}, nil
	}, nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	for i := range 3 {
		p := map[string]any{"name": "progress", "arguments": map[string]any{}, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": ModernVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}, "progressToken": i}}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
		req, _ := http.NewRequest(http.MethodPost, "http://stdio.child/mcp", bytes.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", ModernVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "progress")
		resp, err := d.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(raw, []byte("notifications/progress")) || !bytes.Contains(raw, []byte(`"text":"done"`)) {
			t.Fatalf("call %d: %s, want its progress and its result", i, raw)
		}
	}
	d.mu.Lock()
	c := d.cur
	d.mu.Unlock()
	c.mu.Lock()
	n := len(c.progress)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d progress routes kept after their requests were answered, want 0", n)
	}
}
