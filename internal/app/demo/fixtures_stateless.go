package demo

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
)

// Names of the tool and prompt the list-change triggers add.
const (
	transientTool   = "test_transient_tool"
	transientPrompt = "test_transient_prompt"
)

// addStatelessFixtures registers the diagnostic tools of the 2026-07-28
// server-stateless scenario (SEP-2575).
func addStatelessFixtures(a *gosdk.Adapter) {
	s := a.Server()

	// Needs sampling to do its job, so a client that did not declare it
	// gets -32021 with data.requiredCapabilities {"sampling": {}}: the
	// adapter's capability gate refuses the pause.
	gosdk.AddTool(a, &mcp.Tool{Name: "test_missing_capability", Description: "Needs the client's sampling capability; without it the call fails with -32021.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled("model_answer"); ok {
				return text("sampling answered: " + sampledText(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"model_answer": sample("Reply with one word: ready?", 20)})
		})

	// Elicits through an input_required result: on 2026-07-28 the response
	// stream never carries a server-to-client request.
	gosdk.AddTool(a, &mcp.Tool{Name: "test_streaming_elicitation", Description: "Asks the user for confirmation through an input_required result, never a server-to-client request.",
		InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Elicited("confirm"); ok {
				return text("elicitation answered: " + describeElicitation(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"confirm": form("Continue?", map[string]any{"ok": prop("boolean")})})
		})

	s.AddTool(&mcp.Tool{Name: "test_logging_tool", Description: "Logs one info message; only sent when the request set a log level.", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "test_logging_tool", Data: "test_logging_tool ran"}); err != nil {
				return nil, err
			}
			return text("logged one info message (sent only if a log level was set)"), nil
		})

	var toolChanges, promptChanges atomic.Int64
	s.AddTool(&mcp.Tool{Name: "test_trigger_tool_change", Description: "Changes the tool list (adds or replaces " + transientTool + "), which notifies listeners.", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := toolChanges.Add(1)
			s.AddTool(&mcp.Tool{Name: transientTool, Description: "Added by test_trigger_tool_change.", InputSchema: emptyObject()},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("transient"), nil
				})
			return text(fmt.Sprintf("tool list changed (%d so far)", n)), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_trigger_prompt_change", Description: "Changes the prompt list (adds or replaces " + transientPrompt + "), which notifies listeners.", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := promptChanges.Add(1)
			s.AddPrompt(&mcp.Prompt{Name: transientPrompt, Description: "Added by test_trigger_prompt_change."},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "transient"}}}}, nil
				})
			return text(fmt.Sprintf("prompt list changed (%d so far)", n)), nil
		})
}
