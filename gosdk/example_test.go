package gosdk_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/reqstate"
)

// A two-round tool: ask for confirmation, then act on the sealed
// arguments. The client's MRTR loop answers the question in between.
func Example() {
	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
	server := mcp.NewServer(&mcp.Implementation{Name: "deployer", Version: "1.0.0"}, nil)
	a := gosdk.Install(server, mrtr.New(reqstate.New(ring, nil), nil), nil)

	type Deploy struct {
		Service string `json:"service"`
		Env     string `json:"env"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "deploy", Description: "deploy a service"},
		func(ctx context.Context, req *mcp.CallToolRequest, args Deploy, flow *gosdk.ToolFlow[Deploy]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
					Message:         "Deploy " + args.Service + " to " + args.Env + "?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}},
				}})
			}
			if ans, ok := flow.Elicited("confirm"); !ok || ans.Content["approve"] != true {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not approved"}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + st.Service + " to " + st.Env}}}, nil
		})

	// A client that approves everything, connected in memory.
	client := mcp.NewClient(&mcp.Implementation{Name: "ops", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		panic(err)
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"service": "api", "env": "production"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: deployed api to production
}
