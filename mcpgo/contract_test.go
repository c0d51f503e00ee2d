package mcpgo_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/mcpgo/internal/example"
)

// TestContract runs the guard's whole contract, the table every adapter
// shares, through an mcp-go server over loopback HTTP.
func TestContract(t *testing.T) {
	adaptertest.Run(t, serve)
}

type deployArgs struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

type guessState struct {
	Secret  int `json:"secret"`
	Guesses int `json:"guesses"`
}

func confirm(msg string) mcp.InputRequests {
	return mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
		Mode: mcp.ElicitationModeForm, Message: msg, RequestedSchema: adaptertest.ConfirmSchema()})}
}

func guessRequest(msg string) mcp.InputRequests {
	return mcp.InputRequests{"guess": mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: msg, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"guess": map[string]any{"type": "integer"}}, "required": []string{"guess"}}})}
}

// approved reports an accepted elicitation with content.approve true.
func approved(ans *mcp.ElicitationResult) bool {
	content, _ := ans.Content.(map[string]any)
	return ans.Action == mcp.ElicitationResponseActionAccept && content["approve"] == true
}

// newServer is an mcp-go server with the suite's fixtures, plus guess.
func newServer(c adaptertest.Config) (*server.MCPServer, *mcpgo.Adapter) {
	s := server.NewMCPServer("mrtr-test", "1", server.WithToolCapabilities(false), server.WithPromptCapabilities(false),
		server.WithResourceCapabilities(false, false))
	a := mcpgo.Install(s, c.Guard, &mcpgo.Options{Logger: c.Logger})
	probe := c.Probe

	mcpgo.AddTool(a, mcp.NewTool("deploy", mcp.WithString("service"), mcp.WithString("env")),
		func(ctx context.Context, req mcp.CallToolRequest, args deployArgs, flow *mcpgo.ToolFlow[deployArgs]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, confirm("deploy "+args.Service+"?"))
			}
			if err := probe.Resumed(func(k string) bool { _, ok := flow.Elicited(k); return ok }); err != nil {
				return nil, err
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, confirm("please answer"))
			}
			if !approved(ans) {
				return mcp.NewToolResultError("deployment cancelled"), nil
			}
			return mcp.NewToolResultText(fmt.Sprintf("deployed %s to %s (flow %s)", st.Service, st.Env, flow.ID())), nil
		})

	mcpgo.AddTool(a, mcp.NewTool("guess"),
		func(ctx context.Context, req mcp.CallToolRequest, args struct{}, flow *mcpgo.ToolFlow[guessState]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(guessState{Secret: 7}, guessRequest("guess 1..10"))
			}
			ans, ok := flow.Elicited("guess")
			if !ok || ans.Action != mcp.ElicitationResponseActionAccept {
				return flow.Ask(st, guessRequest("guess again"))
			}
			content, _ := ans.Content.(map[string]any)
			g, _ := content["guess"].(float64)
			st.Guesses++
			if hint := adaptertest.Hint(st.Secret, int(g)); hint != "" {
				return flow.Ask(st, guessRequest(hint))
			}
			return mcp.NewToolResultText(fmt.Sprintf("correct: %d after %d guesses, round %d", st.Secret, st.Guesses, flow.Round())), nil
		})

	mcpgo.AddTool(a, mcp.NewTool("forever"),
		func(ctx context.Context, req mcp.CallToolRequest, args struct{}, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			return flow.Ask(struct{}{}, confirm("again?"))
		})

	mcpgo.AddTool(a, mcp.NewTool("sample"),
		func(ctx context.Context, req mcp.CallToolRequest, args struct{}, flow *mcpgo.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled("q"); ok {
				return mcp.NewToolResultText("model said " + example.SampledText(r)), nil
			}
			return flow.Ask(struct{}{}, mcp.InputRequests{"q": mcp.NewSamplingInputRequest(mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("capital of France?")}}})})
		})

	type deleteArgs struct {
		ID int64 `json:"id"`
	}
	mcpgo.AddTool(a, mcp.NewTool("delete", mcp.WithNumber("id")),
		func(ctx context.Context, req mcp.CallToolRequest, in deleteArgs, flow *mcpgo.ToolFlow[string]) (*mcp.CallToolResult, error) {
			if _, resumed := flow.State(); resumed {
				return mcp.NewToolResultText("deleted"), nil
			}
			return flow.Ask("asked", confirm("delete?"))
		})

	mcpgo.AddPrompt(a, mcp.NewPrompt("context_prompt", mcp.WithPromptDescription("asks for context")),
		func(ctx context.Context, req mcp.GetPromptRequest, flow *mcpgo.PromptFlow[string]) (*mcp.GetPromptResult, error) {
			if ans, ok := flow.Elicited("user_context"); ok && ans.Action == mcp.ElicitationResponseActionAccept {
				tag, _ := flow.State()
				content, _ := ans.Content.(map[string]any)
				return mcp.NewGetPromptResult("context", []mcp.PromptMessage{
					mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(fmt.Sprintf("%s: %v", tag, content["context"])))}), nil
			}
			return flow.Ask("context", mcp.InputRequests{"user_context": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
				Message: "context?", RequestedSchema: adaptertest.ContextSchema()})})
		})

	mcpgo.AddResource(a, mcp.NewResource("test://secret", "secret", mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest, flow *mcpgo.ResourceFlow[int]) ([]mcp.ResourceContents, error) {
			if ans, ok := flow.Elicited("confirm"); ok && ans.Action == mcp.ElicitationResponseActionAccept {
				n, _ := flow.State()
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: fmt.Sprintf("secret %d", n)}}, nil
			}
			return flow.Ask(42, confirm("read the secret?"))
		})

	s.AddTool(mcp.NewTool("raw"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return server.NewInputRequestBuilder("step=1").Elicit("confirm", mcp.ElicitationParams{Message: "?", RequestedSchema: adaptertest.ConfirmSchema()}).ToolResult(), nil
	})
	return s, a
}

// serve is adaptertest's Start for mcpgo.
func serve(t *testing.T, c adaptertest.Config) string {
	t.Helper()
	_, a := newServer(c)
	h := mcpgo.NewHTTPHandler(a, server.WithStreamableHTTPLogger(c.Logger))
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/auth/mcp", bearer(h))
	srv := httptest.NewServer(mux) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL
}

// bearer verifies the suite's tokens and hands the caller to the adapter
// with mcpgo.WithPrincipal, as a deployment's auth middleware does.
func bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		p, valid := adaptertest.ParseToken(tok)
		if !ok || !valid {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(mcpgo.WithPrincipal(r.Context(), p)))
	})
}
