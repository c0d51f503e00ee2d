package mcpgo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// startFlows serves the fixtures on a single-use guard and returns the
// endpoint and the probe.
func startFlows(t *testing.T) (string, *adaptertest.Probe) {
	t.Helper()
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := &adaptertest.Probe{}
	_, a := newServer(adaptertest.Config{Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}), Probe: probe})
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a))
	t.Cleanup(srv.Close)
	return srv.URL, probe
}

// user answers elicitations as the tests' user: approve, give context,
// and guess 3, 6, 9 (told "lower"), then 7.
type user struct{ guesses atomic.Int32 }

func (u *user) answer(msg string) map[string]any {
	switch {
	case msg == "lower":
		return map[string]any{"guess": 7}
	case strings.Contains(msg, "guess") || msg == "higher":
		return map[string]any{"guess": int(u.guesses.Add(1)) * 3}
	}
	return map[string]any{"approve": true, "context": "ctx"}
}

// The mcp-go client's side.
func (u *user) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: u.answer(r.Params.Message)}}, nil
}

func (u *user) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("Paris")}, Model: "m"}, nil
}

// dialMCPGo connects mcp-go's client to url at version, for the test.
func dialMCPGo(t *testing.T, url, version string, opts ...client.ClientOption) (context.Context, *client.Client) {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	if version != "2026-07-28" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}

// callMCPGo returns a function calling tools through c, returning text.
func callMCPGo(ctx context.Context, c *client.Client) func(name string, args map[string]any) string {
	return func(name string, args map[string]any) string {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		return mcpgoText(c.CallTool(ctx, req))
	}
}

// outcome is what one client saw of the flows.
type outcome struct{ deploy, guess, prompt, resource, sample string }

func wantOutcome(t *testing.T, got outcome, sample bool) {
	t.Helper()
	if !strings.HasPrefix(got.deploy, "deployed api to production (flow ") {
		t.Errorf("deploy: %q", got.deploy)
	}
	if got.guess != "correct: 7 after 4 guesses, round 4" {
		t.Errorf("guess: %q", got.guess)
	}
	if got.prompt != "context: ctx" {
		t.Errorf("prompt: %q", got.prompt)
	}
	if got.resource != "secret 42" {
		t.Errorf("resource: %q", got.resource)
	}
	if sample && got.sample != "model said Paris" {
		t.Errorf("sample: %q", got.sample)
	}
}

func mcpgoText(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPGoClient runs the flows with mcp-go's own client, on 2026-07-28
// (Multi Round-Trip Requests on the wire, the client retries) and on
// 2025-11-25 (mcp-go's legacy bridge, and the adapter for resources, ask
// through the session; every round sealed the same way).
func TestMCPGoClient(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			url, probe := startFlows(t)
			u := &user{}
			ctx, c := dialMCPGo(t, url, version, client.WithElicitationHandler(u), client.WithSamplingHandler(u))
			call := callMCPGo(ctx, c)
			var got outcome
			got.deploy = call("deploy", map[string]any{"service": "api", "env": "production"})
			got.guess = call("guess", map[string]any{})
			pr := mcp.GetPromptRequest{}
			pr.Params.Name = "context_prompt"
			if res, err := c.GetPrompt(ctx, pr); err != nil {
				got.prompt = err.Error()
			} else if len(res.Messages) > 0 {
				if tc, ok := res.Messages[0].Content.(mcp.TextContent); ok {
					got.prompt = tc.Text
				}
			}
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = "test://secret"
			if res, err := c.ReadResource(ctx, rr); err != nil {
				got.resource = err.Error()
			} else if len(res.Contents) > 0 {
				if tc, ok := res.Contents[0].(mcp.TextResourceContents); ok {
					got.resource = tc.Text
				}
			}
			// mcp-go's own client and server do not complete a 2025-11-25
			// sampling/createMessage over Streamable HTTP (the client's
			// answer never reaches the waiting call, with or without mrtr:
			// a plain mcp-go v1.2.1 tool hangs the same way), so sampling on
			// the legacy wire is proven with go-sdk's client below.
			if version == "2026-07-28" {
				got.sample = call("sample", map[string]any{})
			}
			wantOutcome(t, got, version == "2026-07-28")
			if probe.Runs.Load() != 1 {
				t.Errorf("deploy resumed %d times, want 1", probe.Runs.Load())
			}
		})
	}
}

// TestGoSDKClient runs the flows with the official go-sdk client against
// the mcp-go server, on both protocol generations.
func TestGoSDKClient(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			url, _ := startFlows(t)
			u := &user{}
			copts := &sdk.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					return &sdk.ElicitResult{Action: "accept", Content: u.answer(r.Params.Message)}, nil
				},
				CreateMessageWithToolsHandler: func(context.Context, *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
					return &sdk.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []sdk.Content{&sdk.TextContent{Text: "Paris"}}}, nil
				},
			}
			var sopts *sdk.ClientSessionOptions
			if version != "" {
				sopts = &sdk.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk", Version: "1"}, copts).
				Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: http.DefaultClient}, sopts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			text := func(res *sdk.CallToolResult, err error) string {
				if err != nil {
					return "error: " + err.Error()
				}
				var b strings.Builder
				for _, c := range res.Content {
					if tc, ok := c.(*sdk.TextContent); ok {
						b.WriteString(tc.Text)
					}
				}
				return b.String()
			}
			var got outcome
			got.deploy = text(cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api", "env": "production"}}))
			got.guess = text(cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "guess", Arguments: map[string]any{}}))
			got.sample = text(cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "sample", Arguments: map[string]any{}}))
			if pr, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "context_prompt"}); err != nil {
				got.prompt = err.Error()
			} else if len(pr.Messages) > 0 {
				if tc, ok := pr.Messages[0].Content.(*sdk.TextContent); ok {
					got.prompt = tc.Text
				}
			}
			if rr, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "test://secret"}); err != nil {
				got.resource = err.Error()
			} else if len(rr.Contents) > 0 {
				got.resource = rr.Contents[0].Text
			}
			wantOutcome(t, got, true)
		})
	}
}

// TestLegacyRoundCapOverEventStream: on 2025-11-25 mcp-go's bridge asks
// every round through the POST's event stream; when the guard refuses the
// third pause of forever (MaxRounds 2), the client gets the contract's
// error inside that stream, rewritten by Handler: -32602 with
// data.reason rounds_exceeded, not mcp-go's -32603.
func TestLegacyRoundCapOverEventStream(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, a := newServer(adaptertest.Config{Guard: mrtr.New(reqstate.New(ring, nil), &mrtr.Options{MaxRounds: 2}), Probe: &adaptertest.Probe{}})
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a))
	t.Cleanup(srv.Close)
	var asked atomic.Int32
	copts := &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked.Add(1)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk", Version: "1"}, copts).
		Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: srv.URL}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	_, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "forever", Arguments: map[string]any{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mrtr.CodeInvalidParams || je.Message != mrtr.RejectMessage || string(je.Data) != `{"reason":"rounds_exceeded"}` {
		t.Fatalf("forever on the legacy wire: %v, want -32602 rounds_exceeded", err)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("the client was asked %d times, want 2 (one per sealed round)", n)
	}
}

// TestHandlerRewritesOnlyItsOwnErrors: a handler error that merely reads
// like a contract error (registered on the server directly) reaches the
// client as mcp-go sends it, -32603 and its text: Handler rewrites only
// the errors the adapter recorded for the call.
func TestHandlerRewritesOnlyItsOwnErrors(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, a := newServer(adaptertest.Config{Guard: mrtr.New(reqstate.New(ring, nil), nil), Probe: &adaptertest.Probe{}})
	s.AddTool(mcp.NewTool("mimic"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("invalid requestState (reason: expired)")
	})
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a))
	t.Cleanup(srv.Close)
	c := &adaptertest.Client{URL: srv.URL}
	r := c.Call(t, "tools/call", map[string]any{"name": "mimic", "arguments": map[string]any{}})
	if r.Error == nil || r.Error.Code != mrtr.CodeInternalError || r.Error.Message != "invalid requestState (reason: expired)" || len(r.Error.Data) > 0 {
		t.Fatalf("a handler's own error: %v, want it unchanged (-32603)", r)
	}
	// The same text from the guard is rewritten.
	r = c.Call(t, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{"service": "a", "env": "b"},
		"requestState": "v1.test.AAAA", "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept"}}})
	if r.Error == nil || r.Error.Code != mrtr.CodeInvalidParams || r.Error.Reason() != "invalid" {
		t.Fatalf("the guard's rejection: %v", r)
	}
}
