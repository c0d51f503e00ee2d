package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// The mcp-go flow benchmark is the flow benchmark on mark3labs/mcp-go
// v1.2.1: the same 2-round "deploy" flow, over loopback HTTP, served by
// mcp-go's Streamable HTTP transport and driven by mcp-go's own client
// (its automatic input_required loop), three ways:
//
//   - sealed: through mrtr (mcpgo.Install, mcpgo.AddTool with flow.Ask,
//     flow.State and flow.Elicited, served by mcpgo.NewHTTPHandler), the
//     guard on default options with the in-memory single-use store;
//   - sealed-nostore: the same without a single-use store;
//   - plain: mcp-go alone (server.NewInputRequestBuilder), the state the
//     plaintext "service=api;env=production" parsed back on the retry, as
//     mcp-go's own multi_round_trip example does;
//   - plain-sized: plain with its state padded to the length of the sealed
//     token (SealedStateLen), so that sealed against plain-sized is what
//     mrtr's own work costs, and plain-sized against plain is what mcp-go
//     charges for carrying a state that long.

// MCPGoFlowEndpoints are the ways the mcp-go server serves the deploy tool.
var MCPGoFlowEndpoints = []FlowEndpoint{
	{Name: "sealed", Path: "/sealed"},
	{Name: "sealed-nostore", Path: "/sealed-nostore"},
	{Name: "plain-sized", Path: "/plain-sized"},
	{Name: "plain", Path: "/plain"},
}

// MCPGoFlowServer serves the deploy tool on every MCPGoFlowEndpoint.
type MCPGoFlowServer struct {
	URL string

	srv     *httptest.Server
	clients []*http.Transport
	runs    atomic.Int64
}

func mcpgoConfirm(service, env string) mcpgomcp.ElicitationParams {
	return mcpgomcp.ElicitationParams{Message: "deploy " + service + " to " + env + "?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}, "required": []string{"approve"},
	}}
}

func mcpgoApproved(r *mcpgomcp.ElicitationResult) bool {
	c, _ := r.Content.(map[string]any)
	return r.Action == mcpgomcp.ElicitationResponseActionAccept && c["approve"] == true
}

var deployTool = mcpgomcp.NewTool("deploy", mcpgomcp.WithDescription("deploy a service"),
	mcpgomcp.WithString("service"), mcpgomcp.WithString("env"))

func (fs *MCPGoFlowServer) sealed(store replay.Store) http.Handler {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		panic(err)
	}
	s := server.NewMCPServer("bench-sealed", "1", server.WithToolCapabilities(false))
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: store}), nil)
	mcpgo.AddTool(a, deployTool,
		func(ctx context.Context, req mcpgomcp.CallToolRequest, args FlowArgs, flow *mcpgo.ToolFlow[FlowState]) (*mcpgomcp.CallToolResult, error) {
			fs.runs.Add(1)
			st, resumed := flow.State()
			ask := func(st FlowState) mcpgomcp.InputRequests {
				return mcpgomcp.InputRequests{"confirm": mcpgomcp.NewElicitationInputRequest(mcpgoConfirm(st.Service, st.Env))}
			}
			if !resumed {
				return flow.Ask(FlowState(args), ask(FlowState(args)))
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, ask(st))
			}
			if !mcpgoApproved(ans) {
				return mcpgomcp.NewToolResultError("deployment cancelled"), nil
			}
			return mcpgomcp.NewToolResultText(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	return mcpgo.NewHTTPHandler(a)
}

// plain serves the deploy tool on mcp-go alone, its state padded to size
// characters when it is shorter.
func (fs *MCPGoFlowServer) plain(size int) http.Handler {
	s := server.NewMCPServer("bench-plain", "1", server.WithToolCapabilities(false))
	s.AddTool(deployTool, func(ctx context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
		fs.runs.Add(1)
		p := req.Params
		if p.RequestState == "" {
			var args FlowArgs
			if err := req.BindArguments(&args); err != nil {
				return nil, err
			}
			return server.NewInputRequestBuilder(padPlainState("service="+args.Service+";env="+args.Env, size)).
				Elicit("confirm", mcpgoConfirm(args.Service, args.Env)).ToolResult(), nil
		}
		st, err := parsePlainState(p.RequestState)
		if err != nil {
			return nil, err
		}
		ans := server.ElicitationResponse(p.InputResponses, "confirm")
		if ans == nil {
			return server.NewInputRequestBuilder(p.RequestState).Elicit("confirm", mcpgoConfirm(st.Service, st.Env)).ToolResult(), nil
		}
		if !mcpgoApproved(ans) {
			return mcpgomcp.NewToolResultError("deployment cancelled"), nil
		}
		return mcpgomcp.NewToolResultText(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
	})
	return server.NewStreamableHTTPServer(s)
}

// padPlainState pads a plain state with a ";pad=AAA…" field to size
// characters; a state that is already as long is returned as is.
func padPlainState(st string, size int) string {
	const field = ";pad="
	if n := size - len(st) - len(field); n > 0 {
		return st + field + strings.Repeat("A", n)
	}
	return st
}

// SealedStateLen is the length of the requestState the sealed endpoints
// hand out in this flow: a token sealed under a key named "bench", with
// the flow's continuation and its one input request key. TestFlowMCPGo
// checks it against the tokens on the wire.
func SealedStateLen() int {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		panic(err)
	}
	cont, err := json.Marshal(FlowState{Service: "api", Env: "production"})
	if err != nil {
		panic(err)
	}
	now := time.Now()
	st := reqstate.State{Continuation: cont, Round: 1, IssuedAt: now, ExpiresAt: now.Add(mrtr.DefaultTTL), Asked: []string{"confirm"}}
	tok, err := reqstate.New(ring, nil).Seal(reqstate.Binding{}, &st)
	if err != nil {
		panic(err)
	}
	return len(tok)
}

// NewMCPGoFlowServer starts the loopback server (127.0.0.1).
func NewMCPGoFlowServer() *MCPGoFlowServer {
	fs := &MCPGoFlowServer{}
	mux := http.NewServeMux()
	mux.Handle("/sealed", fs.sealed(replay.NewMemory(nil)))
	mux.Handle("/sealed-nostore", fs.sealed(nil))
	mux.Handle("/plain-sized", fs.plain(SealedStateLen()))
	mux.Handle("/plain", fs.plain(0))
	fs.srv = httptest.NewServer(mux) // binds 127.0.0.1
	fs.URL = fs.srv.URL
	return fs
}

// Close shuts the server down and closes the clients' idle connections.
func (fs *MCPGoFlowServer) Close() {
	fs.srv.Close()
	for _, t := range fs.clients {
		t.CloseIdleConnections()
	}
}

// Runs reports the tool handler runs so far.
func (fs *MCPGoFlowServer) Runs() int64 { return fs.runs.Load() }

type approver struct{}

func (approver) Elicit(context.Context, mcpgomcp.ElicitationRequest) (*mcpgomcp.ElicitationResult, error) {
	return &mcpgomcp.ElicitationResult{ElicitationResponse: mcpgomcp.ElicitationResponse{
		Action: mcpgomcp.ElicitationResponseActionAccept, Content: map[string]any{"approve": true}}}, nil
}

// Connect connects an mcp-go client, which approves every elicitation, to
// endpoint path on 2026-07-28, with its own connection pool.
func (fs *MCPGoFlowServer) Connect(ctx context.Context, path string) (*client.Client, error) {
	return fs.connect(ctx, path, nil)
}

// connect is Connect with the client's requests going through wrap's
// round tripper when wrap is set.
func (fs *MCPGoFlowServer) connect(ctx context.Context, path string, wrap func(http.RoundTripper) http.RoundTripper) (*client.Client, error) {
	ht := http.DefaultTransport.(*http.Transport).Clone()
	fs.clients = append(fs.clients, ht)
	var rt http.RoundTripper = ht
	if wrap != nil {
		rt = wrap(ht)
	}
	tr, err := transport.NewStreamableHTTP(fs.URL+path, transport.WithHTTPBasicClient(&http.Client{Transport: rt}))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithElicitationHandler(approver{}))
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	res, err := c.Initialize(ctx, mcpgomcp.InitializeRequest{})
	if err != nil {
		c.Close()
		return nil, err
	}
	if res.ProtocolVersion != FlowProtocol {
		c.Close()
		return nil, fmt.Errorf("negotiated protocol %q, want %q", res.ProtocolVersion, FlowProtocol)
	}
	return c, nil
}

// MCPGoFlowCall runs one complete flow through the client's loop and
// returns the result's text.
func MCPGoFlowCall(ctx context.Context, c *client.Client) (string, error) {
	req := mcpgomcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "deploy", FlowCallArgs
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	if res.IsError || res.NeedsInput() || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result: error %v, needs input %v, %d contents", res.IsError, res.NeedsInput(), len(res.Content))
	}
	tc, ok := res.Content[0].(mcpgomcp.TextContent)
	if !ok {
		return "", fmt.Errorf("content is %T, want text", res.Content[0])
	}
	return tc.Text, nil
}
