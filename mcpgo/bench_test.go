package mcpgo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// BenchmarkHandleFlow is the adapter's cost per flow without any
// transport: one op is a complete 2-round deploy flow (pause, then resume
// with the answer) through mcp-go's HandleMessage, on the 2026-07-28
// wire. sealed runs it through the adapter with the in-memory single-use
// store; plain-sized is mcp-go alone with a plaintext state padded to the
// sealed token's length, so the ratio is what the adapter and the guard
// cost, with the state's length the same on both sides.
//
// Run: go test -run '^$' -bench HandleFlow -count 6 (in mcpgo/).
func BenchmarkHandleFlow(b *testing.B) {
	sealed := benchSealedServer(b)
	tok := handleFlow(b, sealed)
	plain := benchPlainServer(len(tok))
	for _, c := range []struct {
		name string
		s    *server.MCPServer
	}{{"sealed", sealed}, {"plain-sized", plain}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				handleFlow(b, c.s)
			}
		})
	}
}

// TestHandleFlow checks that both servers of BenchmarkHandleFlow complete
// the flow, with states of the same length.
func TestHandleFlow(t *testing.T) {
	sealed := benchSealedServer(t)
	tok := handleFlow(t, sealed)
	if !strings.HasPrefix(tok, "v1.bench.") {
		t.Fatalf("sealed state %.12q… is not a v1 token", tok)
	}
	if got := handleFlow(t, benchPlainServer(len(tok))); len(got) != len(tok) {
		t.Fatalf("plain state of %d characters, want %d", len(got), len(tok))
	}
}

// maxFlowAllocs is how many allocations the adapter and the guard add to
// the flow of BenchmarkHandleFlow (first call, pause, resume, answer),
// against mcp-go alone with a state of the same length: the guard's Flow
// on each call, sealing and opening the state, hashing the arguments on
// both calls, the single-use reservation, the typed continuation, the
// call's answers and binding the arguments again on the resume. It was 65
// before the cuts of issue 19, and 40 until the pause kept each input
// request's method beside its key for the audit trail (Flow.PauseInputs,
// issue 29: the keys' slice, one allocation per pause).
const maxFlowAllocs = 41

// TestHandleFlowAllocations pins what the adapter and the guard allocate
// per flow, over what mcp-go allocates for the same flow.
func TestHandleFlowAllocations(t *testing.T) {
	if mcpgo.RaceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	sealed := benchSealedServer(t)
	plain := benchPlainServer(len(handleFlow(t, sealed)))
	s := testing.AllocsPerRun(200, func() { handleFlow(t, sealed) })
	p := testing.AllocsPerRun(200, func() { handleFlow(t, plain) })
	if s-p > maxFlowAllocs {
		t.Errorf("a sealed flow allocates %v times, mcp-go's alone %v: %v more, want at most %d", s, p, s-p, maxFlowAllocs)
	}
}

func benchSealedServer(tb testing.TB) *server.MCPServer {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := server.NewMCPServer("bench", "1", server.WithToolCapabilities(false))
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)}), nil)
	mcpgo.AddTool(a, mcp.NewTool("deploy", mcp.WithString("service"), mcp.WithString("env")),
		func(ctx context.Context, req mcp.CallToolRequest, args deployArgs, flow *mcpgo.ToolFlow[deployArgs]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, benchAsk(args))
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, benchAsk(st))
			}
			if !approved(ans) {
				return mcp.NewToolResultError("deployment cancelled"), nil
			}
			return mcp.NewToolResultText(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	return s
}

// benchPlainServer serves deploy on mcp-go alone, its plaintext state
// padded to size characters.
func benchPlainServer(size int) *server.MCPServer {
	s := server.NewMCPServer("bench", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("deploy", mcp.WithString("service"), mcp.WithString("env")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p := req.Params
			if p.RequestState == "" {
				var args deployArgs
				if err := req.BindArguments(&args); err != nil {
					return nil, err
				}
				st := "service=" + args.Service + ";env=" + args.Env + ";pad="
				st += strings.Repeat("A", max(0, size-len(st)))
				return server.NewInputRequestBuilder(st).Elicit("confirm", benchConfirm(args)).ToolResult(), nil
			}
			// "service=S;env=E;pad=AAA…"
			svc, rest, _ := strings.Cut(strings.TrimPrefix(p.RequestState, "service="), ";env=")
			env, _, _ := strings.Cut(rest, ";pad=")
			st := deployArgs{Service: svc, Env: env}
			ans := server.ElicitationResponse(p.InputResponses, "confirm")
			if ans == nil {
				return server.NewInputRequestBuilder(p.RequestState).Elicit("confirm", benchConfirm(st)).ToolResult(), nil
			}
			if !approved(ans) {
				return mcp.NewToolResultError("deployment cancelled"), nil
			}
			return mcp.NewToolResultText(fmt.Sprintf("deployed %s to %s", st.Service, st.Env)), nil
		})
	return s
}

// benchConfirm is the deploy flow's question, built alike on both servers.
func benchConfirm(args deployArgs) mcp.ElicitationParams {
	return mcp.ElicitationParams{Message: "deploy " + args.Service + " to " + args.Env + "?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}, "required": []string{"approve"}}}
}

func benchAsk(args deployArgs) mcp.InputRequests {
	return mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(benchConfirm(args))}
}

const benchMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}`

// handleFlow runs one complete flow through s, checks that it ends
// deployed, and returns the state of its pause.
func handleFlow(tb testing.TB, s *server.MCPServer) string {
	ctx := context.Background()
	first := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"api","env":"production"},` + benchMeta + `}}`
	var paused struct {
		Result struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	decode(tb, s.HandleMessage(ctx, json.RawMessage(first)), &paused)
	if paused.Result.RequestState == "" {
		tb.Fatalf("first round did not pause: %+v", paused)
	}
	st, _ := json.Marshal(paused.Result.RequestState)
	second := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"api","env":"production"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"approve":true}}},"requestState":` + string(st) + `,` + benchMeta + `}}`
	var done struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	decode(tb, s.HandleMessage(ctx, json.RawMessage(second)), &done)
	if len(done.Result.Content) != 1 || done.Result.Content[0].Text != "deployed api to production" {
		tb.Fatalf("second round: %+v", done)
	}
	return paused.Result.RequestState
}

func decode(tb testing.TB, msg mcp.JSONRPCMessage, v any) {
	raw, err := json.Marshal(msg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		tb.Fatal(err)
	}
}
