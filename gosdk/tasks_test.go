package gosdk_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/reqstate"
	"github.com/mrtr-go/mrtr/task"
)

// TestTasks runs the tasks suite against go-sdk servers.
func TestTasks(t *testing.T) {
	adaptertest.RunTasks(t, startTaskNode)
}

// startTaskNode is one replica: a go-sdk server with tasks over store and
// the suite's fixtures, whose principal is the subject the bearer token
// names (none: anonymous).
func startTaskNode(t *testing.T, store task.Store, o *task.Options) *adaptertest.TaskNode {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "tasks", Version: "1"}, nil)
	a := gosdk.Install(s, mrtr.New(reqstate.New(ring, nil), nil), &gosdk.Options{
		Tasks: task.NewManager(store, o),
		Principal: func(_ context.Context, req mcp.Request) (reqstate.Principal, error) {
			if u, ok := strings.CutPrefix(req.GetExtra().Header.Get("Authorization"), "Bearer "); ok && u != "" {
				return reqstate.Principal{Issuer: "test", Subject: u}, nil
			}
			return reqstate.Principal{}, nil
		},
	})
	n := &adaptertest.TaskNode{Cancelled: make(chan string, 16)}
	type none struct{}
	gosdk.AddTool(a, &mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, &gosdk.TaskOptions{TTL: time.Minute, PollInterval: 100 * time.Millisecond, Message: "asking"},
				func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
					ans, err := tk.Ask(ctx, mcp.InputRequestMap{
						"a": &mcp.ElicitParams{Message: "a?", RequestedSchema: map[string]any{"type": "object"}},
						"b": &mcp.ElicitParams{Message: "b?", RequestedSchema: map[string]any{"type": "object"}},
					})
					if err != nil {
						return nil, err
					}
					x, _ := ans.Elicited("a")
					y, _ := ans.Elicited("b")
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("a=%v b=%v", x.Content["v"], y.Content["v"])}}}, nil
				})
		})
	gosdk.AddTool(a, &mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
				<-ctx.Done()
				n.Cancelled <- tk.ID()
				return nil, ctx.Err()
			})
		})
	gosdk.AddTool(a, &mcp.Tool{Name: "sample", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none, f *gosdk.ToolFlow[none]) (*mcp.CallToolResult, error) {
			return f.RunTask(ctx, nil, func(ctx context.Context, tk *gosdk.Task) (*mcp.CallToolResult, error) {
				_, err := tk.Ask(ctx, mcp.InputRequestMap{"s": &mcp.CreateMessageParams{MaxTokens: 10,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}})
				return nil, err
			})
		})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}
