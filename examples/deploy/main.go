// Command deploy is the smallest useful mrtr server: one tool that asks
// for confirmation before it acts, with its paused state sealed, bound to
// the call and single use. Run it, then drive it with
//
//	go run ./cmd/mrtr call http://127.0.0.1:8090/mcp deploy --arg service=api --arg env=production
package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

type Deploy struct {
	Service string `json:"service" jsonschema:"the service to deploy"`
	Env     string `json:"env" jsonschema:"staging or production"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	keys := flag.String("keys", "", "key ring file (default: a fresh ring, tokens die with the process)")
	flag.Parse()

	ring, err := loadOrGenerate(*keys)
	if err != nil {
		log.Fatal(err)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "deploy-example", Store: replay.NewMemory(nil)})
	server := mcp.NewServer(&mcp.Implementation{Name: "deploy-example", Version: "1.0.0"}, nil)
	a := gosdk.Install(server, guard, nil)

	gosdk.AddTool(a, &mcp.Tool{Name: "deploy", Description: "Deploy a service after confirmation"},
		func(ctx context.Context, req *mcp.CallToolRequest, args Deploy, flow *gosdk.ToolFlow[Deploy]) (*mcp.CallToolResult, error) {
			st, resumed := flow.State()
			if !resumed {
				return flow.Ask(args, confirm("Deploy "+args.Service+" to "+args.Env+"?"))
			}
			ans, ok := flow.Elicited("confirm")
			if !ok {
				return flow.Ask(st, confirm("Please answer: deploy "+st.Service+" to "+st.Env+"?"))
			}
			if ans.Action != "accept" || ans.Content["approve"] != true {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "deployment cancelled"}}}, nil
			}
			// flow.ID() is stable across rounds: use it as the idempotency key of the real deployment.
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + st.Service + " to " + st.Env}}}, nil
		})

	http.Handle("/mcp", gosdk.NewHTTPHandler(server, nil))
	log.Printf("deploy example on http://%s/mcp", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

func confirm(msg string) mcp.InputRequestMap {
	return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"approve": map[string]any{"type": "boolean", "description": "go ahead?"}},
		"required":   []string{"approve"},
	}}}
}

func loadOrGenerate(path string) (*reqstate.KeyRing, error) {
	if path != "" {
		return reqstate.LoadKeyRing(path)
	}
	log.Print("no --keys: using an ephemeral key ring")
	return reqstate.GenerateKeyRing("ephemeral", nil)
}
