package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestContract runs the table every adapter passes (internal/adaptertest)
// through the proxy, in front of a go-sdk server that knows nothing of
// mrtr: its fixtures pause with plain requestStates the proxy seals. The
// proxy differs from an adapter only where Front says.
func TestContract(t *testing.T) {
	adaptertest.RunFront(t, serveProxied, adaptertest.Front{RejectStatus: http.StatusOK, SealsServerState: true, RefusesFoldedNames: true})
}

func serveProxied(t *testing.T, c adaptertest.Config) string {
	t.Helper()
	up := httptest.NewServer(gosdk.NewHTTPHandler(plainServer(c.Probe), nil)) // the transport only: no guard
	t.Cleanup(up.Close)
	anon, err := proxy.New(proxy.Options{Upstream: up.URL, Guard: c.Guard, Logger: c.Logger})
	if err != nil {
		t.Fatal(err)
	}
	authed, err := proxy.New(proxy.Options{Upstream: up.URL, Guard: c.Guard, Logger: c.Logger,
		Principal: func(r *http.Request) (reqstate.Principal, error) {
			p, ok := adaptertest.ParseToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			if !ok {
				return reqstate.Principal{}, errors.New("no bearer token")
			}
			return p, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", anon)
	mux.Handle("/auth/mcp", authed)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// plainServer registers the suite's fixtures on a go-sdk server as a
// server without mrtr writes them: state in plain requestStates, answers
// read from inputResponses.
func plainServer(probe *adaptertest.Probe) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	confirm := func(msg string) mcp.InputRequestMap {
		return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: adaptertest.ConfirmSchema()}}
	}
	elicited := func(m mcp.InputResponseMap, k string) (*mcp.ElicitResult, bool) {
		r, ok := m[k].(*mcp.ElicitResult)
		return r, ok
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "deploy", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p := req.Params
		if p.RequestState == "" {
			return &mcp.CallToolResult{InputRequests: confirm("deploy?"), RequestState: string(p.Arguments)}, nil
		}
		var st struct{ Service, Env string }
		if err := json.Unmarshal([]byte(p.RequestState), &st); err != nil {
			return nil, err
		}
		if err := probe.Resumed(func(k string) bool { _, ok := elicited(p.InputResponses, k); return ok }); err != nil {
			return nil, &jsonrpc.Error{Code: -32000, Message: err.Error()} // a JSON-RPC error releases the token
		}
		ans, ok := elicited(p.InputResponses, "confirm")
		if !ok {
			return &mcp.CallToolResult{InputRequests: confirm("please answer"), RequestState: p.RequestState}, nil
		}
		if ans.Action != "accept" || ans.Content["approve"] != true {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deployment cancelled"}}}, nil
		}
		return text(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
	})
	s.AddTool(&mcp.Tool{Name: "forever", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: confirm("again?"), RequestState: "again"}, nil
	})
	s.AddTool(&mcp.Tool{Name: "sample", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["q"].(*mcp.CreateMessageWithToolsResult); ok && req.Params.RequestState != "" && len(r.Content) > 0 {
			if tc, ok := r.Content[0].(*mcp.TextContent); ok {
				return text("model said " + tc.Text), nil
			}
		}
		return &mcp.CallToolResult{RequestState: "q", InputRequests: mcp.InputRequestMap{"q": &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "capital of France?"}}}}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "delete", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return text("deleted"), nil
		}
		return &mcp.CallToolResult{InputRequests: confirm("delete?"), RequestState: "asked"}, nil
	})
	s.AddTool(&mcp.Tool{Name: "raw", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: confirm("?"), RequestState: "step=1"}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "context_prompt"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if ans, ok := elicited(req.Params.InputResponses, "user_context"); ok && ans.Action == "accept" && req.Params.RequestState != "" {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: fmt.Sprintf("%s: %v", req.Params.RequestState, ans.Content["context"])}}}}, nil
		}
		return &mcp.GetPromptResult{RequestState: "context", InputRequests: mcp.InputRequestMap{"user_context": &mcp.ElicitParams{Message: "context?",
			RequestedSchema: adaptertest.ContextSchema()}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://secret", Name: "secret", MIMEType: "text/plain"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if ans, ok := elicited(req.Params.InputResponses, "confirm"); ok && ans.Action == "accept" && req.Params.RequestState != "" {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "secret " + req.Params.RequestState}}}, nil
		}
		return &mcp.ReadResourceResult{InputRequests: confirm("read the secret?"), RequestState: "42"}, nil
	})
	return s
}
