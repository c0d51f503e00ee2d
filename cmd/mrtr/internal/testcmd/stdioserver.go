package testcmd

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/supervise"
)

// Init makes this test binary what the tests run it as, and exits when it
// is one: mrtr's supervisor of the commands the tests run as upstreams
// (supervise.Init), or the MCP server StdioServerEnv names. TestMain
// calls it first.
func Init() {
	supervise.Init()
	if kind := os.Getenv(StdioServerEnv); kind != "" {
		runStdioServer(kind) // exits
	}
}

// StdioServerEnv makes this test binary an MCP server over stdio:
// "modern" is go-sdk's dual-era server as is; "legacy" refuses
// server/discover, as a 2025-11-25 server does, so the proxy bridges it;
// "fragile" answers a state not starting "delete:" with -32603; a kind
// ending in "+exit" has a tool "exit" that makes the child exit.
// The proxy passes the variable with --upstream-env: it is no MRTR_*
// variable, which never reach the child.
const StdioServerEnv = "STDIO_TEST_SERVER"

// runStdioServer is the server StdioServerEnv asks for; it exits.
func runStdioServer(kind string) {
	kind, withExit := strings.CutSuffix(kind, "+exit")
	if kind == "legacylog" { // legacy, logging as mrtr serve --stdio does: log/slog's text on stderr
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("NO KEY RING GIVEN: the test child's warning", "pid", 1)
		kind = "legacy"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-" + kind, Version: "1"}, nil)
	type item struct {
		Item string `json:"item"`
	}
	// An input request in the 2026-07-28 style: go-sdk sends it as a
	// mid-call elicitation/create to a 2025-11-25 client (the bridge) and
	// re-invokes the handler with the answer.
	mcp.AddTool(s, &mcp.Tool{Name: "delete"}, func(ctx context.Context, req *mcp.CallToolRequest, in item) (*mcp.CallToolResult, any, error) {
		ans, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: "Delete " + in.Item + "?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}},
			}}, RequestState: "delete:" + in.Item}, nil, nil
		}
		if ans.Action != "accept" || ans.Content["ok"] != true {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept " + in.Item}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Item}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		var names []string
		for _, kv := range os.Environ() {
			if n, _, _ := strings.Cut(kv, "="); strings.HasPrefix(n, "MRTR_") || n == "EXTRA" {
				names = append(names, kv)
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(names, " ")}}}, nil, nil
	})
	if withExit {
		// "exit" ends the child before it answers: a caller's input
		// that crashes the server.
		mcp.AddTool(s, &mcp.Tool{Name: "exit"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	}
	if kind == "legacy" {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "server/discover" {
					return nil, &jsonrpcError{Code: -32601, Message: "Method not found"}
				}
				return next(ctx, method, req)
			}
		})
	}
	if kind == "fragile" {
		// Fails on a state it did not issue, with JSON-RPC's Internal
		// error: the stdio probe reads that as a server error.
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if r, ok := req.(*mcp.CallToolRequest); ok && r.Params.RequestState != "" && !strings.HasPrefix(r.Params.RequestState, "delete:") {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
				return next(ctx, method, req)
			}
		})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

type jsonrpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *jsonrpcError) Error() string { return e.Message }
