package gosdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

type env struct {
	url   string
	clk   *fakeclock.Clock
	ring  *reqstate.KeyRing
	probe *adaptertest.Probe
}

type serverOpts struct {
	guard mrtr.Options
	ring  *reqstate.KeyRing
}

type deployArgs struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

type deployState struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

type guessState struct {
	Secret  int `json:"secret"`
	Guesses int `json:"guesses"`
}

func confirmRequest(msg string) mcp.InputRequestMap {
	return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: adaptertest.ConfirmSchema()}}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// startServer runs serve on a guard of o on a fake clock.
func startServer(t *testing.T, o serverOpts) *env {
	t.Helper()
	e := &env{clk: fakeclock.New(time.Now()), probe: &adaptertest.Probe{}}
	e.ring = o.ring
	if e.ring == nil {
		var err error
		if e.ring, err = reqstate.GenerateKeyRing("test", nil); err != nil {
			t.Fatal(err)
		}
	}
	gopts := o.guard
	gopts.Now = e.clk.Now
	if gopts.Store == useMemory {
		gopts.Store = replay.NewMemory(&replay.MemoryOptions{Now: e.clk.Now})
	}
	e.url = serve(t, adaptertest.Config{Guard: mrtr.New(reqstate.New(e.ring, nil), &gopts), Probe: e.probe})
	return e
}

// serve is adaptertest's Start for gosdk: an MCP server with mrtr-sealed
// tools, a prompt and a resource (the suite's fixtures, plus guess) over
// loopback HTTP, serving both protocol generations.
func serve(t *testing.T, c adaptertest.Config) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "mrtr-test", Version: "1"}, &mcp.ServerOptions{Logger: c.Logger})
	a := gosdk.Install(s, c.Guard, &gosdk.Options{Logger: c.Logger})
	probe := c.Probe

	gosdk.AddTool(a, &mcp.Tool{Name: "deploy", Description: "deploy a service"},
		func(ctx context.Context, req *mcp.CallToolRequest, args deployArgs, flow *gosdk.ToolFlow[deployState]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(deployState(args), confirmRequest("deploy "+args.Service+"?"))
			}
			if err := probe.Resumed(func(k string) bool { _, ok := flow.Elicited(k); return ok }); err != nil {
				return nil, err
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, confirmRequest("please answer"))
			}
			if ans.Action != "accept" || ans.Content["approve"] != true {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deployment cancelled"}}}, nil
			}
			return text(fmt.Sprintf("deployed %s to %s (flow %s)", st.Service, st.Env, flow.ID())), nil
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "guess"},
		func(ctx context.Context, req *mcp.CallToolRequest, args struct{}, flow *gosdk.ToolFlow[guessState]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(guessState{Secret: 7}, guessRequest("guess 1..10"))
			}
			ans, ok := flow.Elicited("guess")
			if !ok || ans.Action != "accept" {
				return flow.Ask(st, guessRequest("guess again"))
			}
			g, _ := ans.Content["guess"].(float64)
			st.Guesses++
			if hint := adaptertest.Hint(st.Secret, int(g)); hint != "" {
				return flow.Ask(st, guessRequest(hint))
			}
			return text(fmt.Sprintf("correct: %d after %d guesses, round %d", st.Secret, st.Guesses, flow.Round())), nil
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "forever"},
		func(ctx context.Context, req *mcp.CallToolRequest, args struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			return flow.Ask(struct{}{}, confirmRequest("again?"))
		})

	gosdk.AddTool(a, &mcp.Tool{Name: "sample"},
		func(ctx context.Context, req *mcp.CallToolRequest, args struct{}, flow *gosdk.ToolFlow[struct{}]) (*mcp.CallToolResult, error) {
			if r, ok := flow.Sampled("q"); ok {
				if tc, ok := r.Content[0].(*mcp.TextContent); ok {
					return text("model said " + tc.Text), nil
				}
			}
			return flow.Ask(struct{}{}, mcp.InputRequestMap{"q": &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "capital of France?"}}}}})
		})

	type deleteArgs struct {
		ID int64 `json:"id"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "delete"},
		func(ctx context.Context, req *mcp.CallToolRequest, in deleteArgs, flow *gosdk.ToolFlow[string]) (*mcp.CallToolResult, error) {
			if _, resumed := flow.State(); resumed {
				return text("deleted"), nil
			}
			return flow.Ask("asked", confirmRequest("delete?"))
		})

	gosdk.AddPrompt(a, &mcp.Prompt{Name: "context_prompt", Description: "asks for context"},
		func(ctx context.Context, req *mcp.GetPromptRequest, flow *gosdk.PromptFlow[string]) (*mcp.GetPromptResult, error) {
			if ans, ok := flow.Elicited("user_context"); ok && ans.Action == "accept" {
				tag, _ := flow.State()
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
					Content: &mcp.TextContent{Text: fmt.Sprintf("%s: %v", tag, ans.Content["context"])}}}}, nil
			}
			return flow.Ask("context", mcp.InputRequestMap{"user_context": &mcp.ElicitParams{Message: "context?",
				RequestedSchema: adaptertest.ContextSchema()}})
		})

	gosdk.AddResource(a, &mcp.Resource{URI: "test://secret", Name: "secret", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest, flow *gosdk.ResourceFlow[int]) (*mcp.ReadResourceResult, error) {
			if ans, ok := flow.Elicited("confirm"); ok && ans.Action == "accept" {
				n, _ := flow.State()
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: fmt.Sprintf("secret %d", n)}}}, nil
			}
			return flow.Ask(42, confirmRequest("read the secret?"))
		})

	s.AddTool(&mcp.Tool{Name: "raw", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{InputRequests: confirmRequest("?"), RequestState: "step=1"}, nil
		})

	verify := func(ctx context.Context, tok string, r *http.Request) (*auth.TokenInfo, error) {
		// "iss|" verifies with no subject, which the adapter must refuse.
		iss, sub, ok := strings.Cut(tok, "|")
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: sub, Expiration: time.Now().Add(time.Hour), Extra: map[string]any{"iss": iss}}, nil
	}
	h := gosdk.NewHTTPHandler(s, &gosdk.HTTPOptions{Logger: c.Logger})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/auth/mcp", auth.RequireBearerToken(verify, nil)(h))
	srv := httptest.NewServer(mux) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL
}

// useMemory in serverOpts.guard.Store asks for a memory store on the test clock.
var useMemory replay.Store = replay.NewMemory(nil)

func guessRequest(msg string) mcp.InputRequestMap {
	return mcp.InputRequestMap{"guess": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"guess": map[string]any{"type": "integer"}}, "required": []string{"guess"}}}}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

type clientOpts struct {
	path     string // "/mcp" by default
	token    string
	legacy   bool
	manual   bool // disable the client's MRTR loop
	noElicit bool
	sampling bool
	elicit   func(*mcp.ElicitRequest) (*mcp.ElicitResult, error)
}

func connect(t *testing.T, e *env, o clientOpts) *mcp.ClientSession {
	t.Helper()
	if o.path == "" {
		o.path = "/mcp"
	}
	copts := &mcp.ClientOptions{}
	if !o.noElicit {
		copts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if o.elicit != nil {
				return o.elicit(r)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "context": "ctx"}}, nil
		}
	}
	if o.sampling {
		copts.CreateMessageWithToolsHandler = func(ctx context.Context, r *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "Paris"}}}, nil
		}
	}
	if o.manual {
		copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + o.path}
	if o.token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{o.token}}
	}
	var sopts *mcp.ClientSessionOptions
	if o.legacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, copts).Connect(t.Context(), tr, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// wantReject checks a JSON-RPC error of the error contract.
func wantReject(t *testing.T, err error, reason mrtr.Reason) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v (%T), want a JSON-RPC error", err, err)
	}
	var data struct{ Reason string }
	json.Unmarshal(je.Data, &data)
	if je.Code != -32602 || je.Message != "invalid requestState" || data.Reason != string(reason) {
		t.Fatalf("error code %d message %q data %s, want -32602 invalid requestState reason %s", je.Code, je.Message, je.Data, reason)
	}
}

// pauseDeploy runs round 1 of deploy by hand and returns the sealed state.
func pauseDeploy(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState == "" || res.InputRequests["confirm"] == nil {
		t.Fatalf("round 1 did not pause: %+v", res)
	}
	return res.RequestState
}

func accept(content map[string]any) mcp.InputResponseMap {
	return mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: content}}
}

var prodArgs = map[string]any{"service": "api", "env": "production"}
