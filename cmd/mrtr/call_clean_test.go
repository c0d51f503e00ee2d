package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

// startHostileServer serves a go-sdk server (stateless) whose tools,
// prompt and resource put terminal controls in everything they return.
func startHostileServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	object := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "text", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "text " + testcmd.Hostile},
			&mcp.ResourceLink{URI: "test://link" + testcmd.Hostile, Name: "name" + testcmd.Hostile},
			&mcp.ImageContent{MIMEType: "image/png" + testcmd.Hostile, Data: []byte("x")},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://e" + testcmd.Hostile, MIMEType: "text/plain" + testcmd.Hostile, Text: "t"}},
		}, StructuredContent: map[string]any{"s": "structured " + testcmd.Hostile}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "tool error " + testcmd.Hostile}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused " + testcmd.Hostile, Data: json.RawMessage(`{"reason":"r\u001b[2J\u009b"}`)}
	})
	s.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Description: "description " + testcmd.Hostile, Messages: []*mcp.PromptMessage{
			{Role: mcp.Role("user" + testcmd.Hostile), Content: &mcp.TextContent{Text: "prompt " + testcmd.Hostile}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r" + testcmd.Hostile}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "resource " + testcmd.Hostile}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCallCleansServerText pins issue 27 item 7 for mrtr call: tool
// text, resource text, resource-link URIs and names, MIME types, prompt
// roles and text, structured content and JSON-RPC error messages reach
// stdout and stderr without terminal controls, the visible text kept.
func TestCallCleansServerText(t *testing.T) {
	url := startHostileServer(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string // in order, on stdout and then the error
	}{
		{"tool text", []string{"text"}, []string{"text passFAIL!\n", "[resource link test://linkpassFAIL! (namepassFAIL!)]\n",
			"[image image/pngpassFAIL!, 1 bytes]\n", "[resource test://epassFAIL!, text/plainpassFAIL!, 1 bytes of text]\n", `"structured `}},
		{"tool error", []string{"fail"}, []string{"tool fail reported an error"}},
		{"JSON-RPC error", []string{"rpcerr"}, []string{"error -32602: refused passFAIL!\n  data: "}},
		{"prompt", []string{"--prompt", "p"}, []string{"description passFAIL!\n", "userpassFAIL!: prompt passFAIL!\n"}},
		{"resource", []string{"--resource", "test://r"}, []string{"resource passFAIL!\n"}},
		{"list", nil, []string{"test://r (rpassFAIL!)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, append([]string{url}, tc.args...)...)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			testcmd.WantClean(t, "stdout", out)
			testcmd.WantClean(t, "stderr", errOut)
			testcmd.WantClean(t, "the error", msg)
			testcmd.WantInOrder(t, out+errOut+msg, tc.want...)
		})
	}
}
