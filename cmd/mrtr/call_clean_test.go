package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/call"
)

// hostile is server text that would drive a terminal: an OSC 52
// clipboard write, a screen clear and cursor home, a C1 CSI, a carriage
// return that overwrites the line, and a bidi override.
const hostile = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[Hpass\u009b31m\rFAIL\u202e!"

// wantClean fails t if s has a control character other than newline and
// tab, or a bidi formatting character.
func wantClean(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			t.Errorf("%s has %U: %q", what, r, s)
			return
		}
	}
}

// startHostileServer serves a go-sdk server (stateless) whose tools,
// prompt and resource put terminal controls in everything they return.
func startHostileServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	object := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "text", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "text " + hostile},
			&mcp.ResourceLink{URI: "test://link" + hostile, Name: "name" + hostile},
			&mcp.ImageContent{MIMEType: "image/png" + hostile, Data: []byte("x")},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://e" + hostile, MIMEType: "text/plain" + hostile, Text: "t"}},
		}, StructuredContent: map[string]any{"s": "structured " + hostile}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "tool error " + hostile}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused " + hostile, Data: json.RawMessage(`{"reason":"r\u001b[2J\u009b"}`)}
	})
	s.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Description: "description " + hostile, Messages: []*mcp.PromptMessage{
			{Role: mcp.Role("user" + hostile), Content: &mcp.TextContent{Text: "prompt " + hostile}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r" + hostile}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "resource " + hostile}}}, nil
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
			wantClean(t, "stdout", out)
			wantClean(t, "stderr", errOut)
			wantClean(t, "the error", msg)
			wantInOrder(t, out+errOut+msg, tc.want...)
		})
	}
}

// TestSampleCleansServerText: a sampling request's roles, system prompt
// and messages are shown without terminal controls.
func TestSampleCleansServerText(t *testing.T) {
	var out strings.Builder
	p := call.NewPrompter(strings.NewReader("reply\n"), &out)
	_, err := p.Sample(t.Context(), &mcp.CreateMessageParams{SystemPrompt: "system " + hostile, MaxTokens: 10,
		Messages: []*mcp.SamplingMessage{{Role: mcp.Role("user" + hostile), Content: &mcp.TextContent{Text: "message " + hostile}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantClean(t, "the prompt", out.String())
	wantInOrder(t, out.String(), "system: system passFAIL!\n", "userpassFAIL!: message passFAIL!\n")
}
