package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// schemaAnswer plays the user for any form the upstreams ask: it fills
// the properties it knows (name, color, ok) of the requested schema.
func schemaAnswer(schema any) map[string]any {
	b, _ := json.Marshal(schema)
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	json.Unmarshal(b, &s)
	out := map[string]any{}
	for k := range s.Properties {
		switch k {
		case "name":
			out[k] = "Alice"
		case "color":
			out[k] = "blue"
		case "ok", "confirm", "approve":
			out[k] = true
		default:
			out[k] = "x"
		}
	}
	return out
}

// stateCounter counts the POSTs whose body carries a requestState that
// is an mrtr token (what a client behind the proxy must only ever see).
type stateCounter struct {
	sealed, plain atomic.Int32
}

func (c *stateCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := r.GetBody()
		if err == nil {
			var msg struct {
				Params struct {
					RequestState *string `json:"requestState"`
				} `json:"params"`
			}
			if json.NewDecoder(body).Decode(&msg) == nil && msg.Params.RequestState != nil {
				if strings.HasPrefix(*msg.Params.RequestState, "v1.") {
					c.sealed.Add(1)
				} else {
					c.plain.Add(1)
				}
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestProxyInterop: go-sdk's client and mark3labs/mcp-go's client (both on
// the 2026-07-28 wire, each with its own automatic input_required loop)
// complete multi-round flows of both upstreams through `mrtr proxy`, and
// every requestState they echo is an mrtr token.
func TestProxyInterop(t *testing.T) {
	needHarness(t) // the TypeScript upstream comes with the harness install
	t.Parallel()
	upstreams := []struct {
		name, url, tool string
		args            map[string]any
		want            string
	}{
		{"everything-server", startProxied(t, startEverything(t, true)), "test_input_required_result_multi_round", map[string]any{}, "Alice"},
		{"typescript", startProxied(t, startTSUpstream(t)), "transfer", map[string]any{"to": "bob", "amount": 5}, "transferred 5 to bob"},
	}
	clients := map[string]func(t *testing.T, url, tool string, args map[string]any, rt http.RoundTripper) string{
		"go-sdk": func(t *testing.T, url, tool string, args map[string]any, rt http.RoundTripper) string {
			client := mcp.NewClient(&mcp.Implementation{Name: "mrtr-e2e-gosdk", Version: "1.0.0"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: schemaAnswer(r.Params.RequestedSchema)}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}},
				&mcp.ClientSessionOptions{ProtocolVersion: wire2026})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Fatalf("call %s: %v", tool, err)
			}
			return goSDKText(res)
		},
		"mcp-go": func(t *testing.T, url, tool string, args map[string]any, rt http.RoundTripper) string {
			tr, err := m3transport.NewStreamableHTTP(url, m3transport.WithHTTPBasicClient(&http.Client{Transport: rt}))
			if err != nil {
				t.Fatal(err)
			}
			c := m3client.NewClient(tr, m3client.WithElicitationHandler(m3SchemaElicitor{}), m3client.WithProtocolVersion(wire2026))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
			defer c.Close()
			initReq := m3.InitializeRequest{}
			initReq.Params.ClientInfo = m3.Implementation{Name: "mrtr-e2e-mcp-go", Version: "1.0.0"}
			initReq.Params.ProtocolVersion = wire2026
			if _, err := c.Initialize(ctx, initReq); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			req := m3.CallToolRequest{}
			req.Params.Name = tool
			req.Params.Arguments = args
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("call %s: %v", tool, err)
			}
			var parts []string
			for _, content := range res.Content {
				if tc, ok := m3.AsTextContent(content); ok {
					parts = append(parts, tc.Text)
				}
			}
			return strings.Join(parts, "\n")
		},
	}
	for _, up := range upstreams {
		for name, run := range clients {
			t.Run(up.name+"/"+name, func(t *testing.T) {
				sc := &stateCounter{}
				got := run(t, up.url, up.tool, up.args, sc)
				if !strings.Contains(got, up.want) {
					t.Fatalf("result %q, want it to contain %q", got, up.want)
				}
				if sc.sealed.Load() == 0 || sc.plain.Load() != 0 {
					t.Fatalf("the client echoed %d mrtr tokens and %d other states; want only mrtr tokens, at least one",
						sc.sealed.Load(), sc.plain.Load())
				}
			})
		}
	}
}

// m3SchemaElicitor answers mcp-go's elicitations with schemaAnswer.
type m3SchemaElicitor struct{}

func (m3SchemaElicitor) Elicit(_ context.Context, r m3.ElicitationRequest) (*m3.ElicitationResult, error) {
	return &m3.ElicitationResult{ElicitationResponse: m3.ElicitationResponse{
		Action: m3.ElicitationResponseActionAccept, Content: schemaAnswer(r.Params.RequestedSchema),
	}}, nil
}

// TestProxyInteropTypeScript: the TypeScript client 2.4.0 completes the
// multi-round flows of both upstreams through `mrtr proxy`, echoing only
// mrtr tokens.
func TestProxyInteropTypeScript(t *testing.T) {
	needHarness(t)
	t.Parallel()
	for _, up := range []struct {
		name, url, tool, args, want string
	}{
		{"everything-server", startProxied(t, startEverything(t, true)), "test_input_required_result_multi_round", `{}`, "Alice"},
		{"typescript", startProxied(t, startTSUpstream(t)), "transfer", `{"to":"bob","amount":5}`, "transferred 5 to bob"},
	} {
		t.Run(up.name, func(t *testing.T) {
			res := runTSInterop(t, up.url, up.tool, up.args)
			if !strings.Contains(res.Text, up.want) || res.IsError {
				t.Fatalf("result %q (isError %v), want it to contain %q", res.Text, res.IsError, up.want)
			}
			if res.States.Sealed == 0 || res.States.Plain != 0 {
				t.Fatalf("the client echoed %d mrtr tokens and %d other states", res.States.Sealed, res.States.Plain)
			}
		})
	}
}
