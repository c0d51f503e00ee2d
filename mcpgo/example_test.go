package mcpgo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/reqstate"
)

type Deploy struct {
	Service string `json:"service"`
	Env     string `json:"env"`
}

func Example() {
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	s := server.NewMCPServer("deployer", "1.0.0", server.WithToolCapabilities(false))
	a := mcpgo.Install(s, mrtr.New(reqstate.New(ring, nil), nil), nil)
	mcpgo.AddTool(a, mcp.NewTool("deploy", mcp.WithString("service"), mcp.WithString("env")),
		func(ctx context.Context, req mcp.CallToolRequest, args Deploy, flow *mcpgo.ToolFlow[Deploy]) (*mcp.CallToolResult, error) {
			confirm := mcp.InputRequests{"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{
				Message: "Deploy " + args.Service + " to " + args.Env + "?",
				RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"approve": map[string]any{"type": "boolean"}}},
			})}
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, confirm)
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, confirm) // a missing answer: ask again
			}
			if ans.Action != mcp.ElicitationResponseActionAccept {
				return mcp.NewToolResultError("cancelled"), nil
			}
			return mcp.NewToolResultText("deployed " + st.Service + " to " + st.Env), nil
		})
	srv := httptest.NewServer(mcpgo.NewHTTPHandler(a))
	defer srv.Close()

	call := func(params map[string]any) map[string]any {
		params["name"] = "deploy"
		params["arguments"] = map[string]any{"service": "api", "env": "staging"}
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "deploy")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		json.Unmarshal(raw, &out)
		return out
	}

	first := call(map[string]any{})["result"].(map[string]any)
	fmt.Println(first["resultType"])
	answer := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	done := call(map[string]any{"requestState": first["requestState"], "inputResponses": answer})["result"].(map[string]any)
	fmt.Println(done["content"].([]any)[0].(map[string]any)["text"])
	forged := call(map[string]any{"requestState": "step=1", "inputResponses": answer})["error"].(map[string]any)
	fmt.Println(forged["code"], forged["message"], forged["data"])
	// Output:
	// input_required
	// deployed api to staging
	// -32602 invalid requestState map[reason:invalid]
}
